package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// acp's signals differ from the other commands' (signals.go): during an
// interactive turn the first Ctrl-C only cancels the turn (session/cancel,
// which the agent answers "cancelled") and the prompt comes back. Then, or
// at the idle prompt, or with --prompt, or on SIGTERM/SIGHUP at any time,
// the command ends: the turn is cancelled and the agent closed with the
// ladder (on a goroutine, so that the ladder starts at once even while the
// turn waits for the agent), and the exit status is 128+N. One more signal
// kills the agent's process group and every group of ours.
//
// The agent and its terminals run in process groups of their own, so the
// terminal's Ctrl-C reaches only agentwire.

// errTurnInterrupted is the cause of a turn cancelled by the first Ctrl-C.
var errTurnInterrupted = errors.New("turn cancelled by Ctrl-C")

type acpSignals struct {
	ctx    context.Context // ends when the command must end
	cancel context.CancelCauseFunc
	sigs   chan os.Signal
	done   chan struct{}
	exited chan struct{}
	out    io.Writer

	mu          sync.Mutex
	interactive bool
	turn        context.CancelCauseFunc // the running turn's; nil when idle
	turnSignals int                     // signals since the turn started
	first       os.Signal               // the signal that ends the command
	ending      bool
	closeFn     func()
	kills       []func()
}

func watchACPSignals(out io.Writer, interactive bool) *acpSignals {
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &acpSignals{ctx: ctx, cancel: cancel, sigs: make(chan os.Signal, 4), done: make(chan struct{}),
		exited: make(chan struct{}), out: out, interactive: interactive}
	signal.Notify(s.sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go s.watch()
	return s
}

func (s *acpSignals) watch() {
	defer close(s.exited)
	for {
		select {
		case <-s.done:
			return
		case sig := <-s.sigs:
			s.handle(sig)
		}
	}
}

func (s *acpSignals) handle(sig os.Signal) {
	s.mu.Lock()
	if s.ending {
		kills := s.kills
		s.mu.Unlock()
		fmt.Fprintln(s.out, "agentwire acp: killing the agent")
		for _, k := range kills {
			k()
		}
		killChildGroups()
		return
	}
	if s.interactive && sig == os.Interrupt && s.turn != nil && s.turnSignals == 0 {
		s.turnSignals++
		cancel := s.turn
		s.mu.Unlock()
		fmt.Fprintln(s.out, "\nagentwire acp: cancelling the turn… (Ctrl-C again stops the agent)")
		cancel(errTurnInterrupted)
		return
	}
	s.ending, s.first = true, sig
	turn, closeFn := s.turn, s.closeFn
	s.mu.Unlock()
	ie := &interruptedError{sig}
	s.cancel(ie)
	if turn != nil {
		turn(ie)
	}
	if closeFn != nil {
		go closeFn()
	}
}

// setClose is what ends the agent (the ladder) on the ending signal.
func (s *acpSignals) setClose(f func()) {
	s.mu.Lock()
	s.closeFn = f
	ending := s.ending
	s.mu.Unlock()
	if ending {
		go f()
	}
}

// onKill registers what the last signal runs.
func (s *acpSignals) onKill(f func()) {
	s.mu.Lock()
	s.kills = append(s.kills, f)
	s.mu.Unlock()
}

func (s *acpSignals) startTurn(cancel context.CancelCauseFunc) {
	s.mu.Lock()
	s.turn, s.turnSignals = cancel, 0
	ending := s.ending
	s.mu.Unlock()
	if ending {
		cancel(context.Cause(s.ctx))
	}
}

func (s *acpSignals) endTurn() {
	s.mu.Lock()
	s.turn = nil
	s.mu.Unlock()
}

// signal is the signal that ends the command, or nil.
func (s *acpSignals) signal() os.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first
}

// code is 128+N once signal N ends the command, else 0.
func (s *acpSignals) code() int { return signalCode(s.signal()) }

func (s *acpSignals) stop() {
	signal.Stop(s.sigs)
	close(s.done)
	<-s.exited
	s.cancel(nil)
}
