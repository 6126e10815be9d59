package server

import "slices"

// registry is a map that remembers insertion order: lists come back in
// the order things were added ("the same tools in the same order", which
// clients and the conformance suite rely on). The Server's mutex guards it.
type registry[T any] struct {
	items map[string]T
	order []string
}

// put adds or replaces an item.
func (r *registry[T]) put(name string, v T) {
	if r.items == nil {
		r.items = map[string]T{}
	}
	if _, ok := r.items[name]; !ok {
		r.order = append(r.order, name)
	}
	r.items[name] = v
}

// remove deletes an item and reports whether there was one.
func (r *registry[T]) remove(name string) bool {
	if _, ok := r.items[name]; !ok {
		return false
	}
	delete(r.items, name)
	r.order = slices.DeleteFunc(r.order, func(n string) bool { return n == name })
	return true
}

func (r *registry[T]) get(name string) (T, bool) {
	v, ok := r.items[name]
	return v, ok
}

func (r *registry[T]) len() int { return len(r.items) }

// list maps the items, in order.
func list[T, U any](r *registry[T], f func(T) U) []U {
	out := make([]U, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, f(r.items[n]))
	}
	return out
}
