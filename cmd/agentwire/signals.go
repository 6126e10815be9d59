package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
)

// Signals are handled here, in the command, never in the library: the
// first SIGINT, SIGTERM or SIGHUP asks the command to stop cleanly (it
// cancels the context the command works under, so that it runs the
// shutdown ladder on its server and writes its report), and a second one
// kills the server's process group at once. Without this, the default
// action ends agentwire on the spot and the server, in a process group of
// its own, is re-parented to init and keeps running.

// interrupts watches for the signals that stop a command.
type interrupts struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	sigs   chan os.Signal
	done   chan struct{} // closed by stop
	exited chan struct{} // closed when the watcher has returned
	second chan struct{} // closed on the second signal

	mu    sync.Mutex
	first os.Signal
	kills map[int]func()
	next  int
}

// interruptedError is the cause of an interrupted command's context.
type interruptedError struct{ sig os.Signal }

func (e *interruptedError) Error() string { return "interrupted by " + signalName(e.sig) }

// watchInterrupts starts watching; stop ends it (and restores the default
// actions).
func watchInterrupts() *interrupts {
	ctx, cancel := context.WithCancelCause(context.Background())
	in := &interrupts{ctx: ctx, cancel: cancel, sigs: make(chan os.Signal, 4),
		done: make(chan struct{}), exited: make(chan struct{}), second: make(chan struct{}), kills: map[int]func(){}}
	signal.Notify(in.sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go in.watch()
	active.Store(in)
	return in
}

// active is the watch of the running command (one per process), for the
// code that has no handle on it.
var active atomic.Pointer[interrupts]

// ladderCutShort is (*interrupts).ladderCutShort of the running command's
// watch; without one, it is ctx.Done().
func ladderCutShort(ctx context.Context) <-chan struct{} {
	if in := active.Load(); in != nil {
		return in.ladderCutShort(ctx)
	}
	return ctx.Done()
}

// onSecondSignal is (*interrupts).onSecond of the running command's watch.
func onSecondSignal(kill func()) (remove func()) {
	if in := active.Load(); in != nil {
		return in.onSecond(kill)
	}
	return func() {}
}

func (in *interrupts) watch() {
	defer close(in.exited)
	n := 0
	for {
		select {
		case <-in.done:
			return
		case s := <-in.sigs:
			n++
			if n == 1 {
				in.mu.Lock()
				in.first = s
				in.mu.Unlock()
				in.cancel(&interruptedError{s})
				continue
			}
			if n == 2 {
				close(in.second)
				in.mu.Lock()
				kills := make([]func(), 0, len(in.kills))
				for _, k := range in.kills {
					kills = append(kills, k)
				}
				in.mu.Unlock()
				for _, k := range kills {
					go k()
				}
				// Whatever server was started but not registered yet
				// (the ladder of a failed connect, say) goes too.
				killChildGroups()
			}
		}
	}
}

// stop stops watching: later signals have their default action again.
func (in *interrupts) stop() {
	signal.Stop(in.sigs)
	close(in.done)
	<-in.exited
	in.cancel(nil)
	active.CompareAndSwap(in, nil)
}

// onSecond registers kill to run (on a goroutine of its own) when the
// second signal comes; it runs at once if it already came. remove
// unregisters it.
func (in *interrupts) onSecond(kill func()) (remove func()) {
	select {
	case <-in.second:
		go kill()
		return func() {}
	default:
	}
	in.mu.Lock()
	id := in.next
	in.next++
	in.kills[id] = kill
	in.mu.Unlock()
	return func() {
		in.mu.Lock()
		delete(in.kills, id)
		in.mu.Unlock()
	}
}

// secondCame reports whether the second signal came.
func (in *interrupts) secondCame() bool {
	select {
	case <-in.second:
		return true
	default:
		return false
	}
}

// signal returns the first signal, or nil.
func (in *interrupts) signal() os.Signal {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.first
}

// code is the exit status of an interrupted command: 128 plus the signal's
// number, as a shell reports a command ended by it (130 for SIGINT, 143 for
// SIGTERM); 0 when no signal came.
func (in *interrupts) code() int {
	return signalCode(in.signal())
}

func signalCode(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 0
}

// interruptedBy reports the signal that cancelled ctx, if one did.
func interruptedBy(ctx context.Context) (os.Signal, bool) {
	var ie *interruptedError
	if errors.As(context.Cause(ctx), &ie) {
		return ie.sig, true
	}
	return nil, false
}

// ladderCutShort returns a channel closed when the shutdown ladder of a
// command working under ctx must give way to killing the server: when ctx
// ends for another reason than a signal (the command's own deadline), or
// on the second signal. The first signal alone lets the ladder run. The
// channel's goroutine ends with the watch.
func (in *interrupts) ladderCutShort(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			if _, ok := interruptedBy(ctx); !ok {
				close(ch)
				return
			}
			select {
			case <-in.second:
				close(ch)
			case <-in.done:
			}
		case <-in.second:
			close(ch)
		case <-in.done:
		}
	}()
	return ch
}

func signalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	}
	if s == nil {
		return "a signal"
	}
	return s.String()
}
