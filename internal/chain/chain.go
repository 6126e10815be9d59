// Package chain composes middleware: the one loop behind rpc's, the MCP
// server's, the ACP agent's and the HTTP client's middleware lists.
package chain

// Compose wraps base in mw, the first outermost (Compose(b, [x, y]) is
// x(y(b))), skipping nil entries. ok is false when there is nothing to
// wrap with: the caller then calls base directly (or keeps no chain at
// all), so that a list without middleware costs nothing.
func Compose[T any, M ~func(T) T](base T, mw []M) (h T, ok bool) {
	h = base
	for i := len(mw) - 1; i >= 0; i-- {
		if mw[i] != nil {
			h, ok = mw[i](h), true
		}
	}
	return h, ok
}
