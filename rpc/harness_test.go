package rpc_test

import (
	"testing"

	"github.com/agentwire/agentwire/internal/wiretest"
)

func TestMain(m *testing.M) { leakCheckedMain(m) }

// Every wire test of this package, run again over the message seam
// (rpc.NewMessages): the same raw lines, the same answers.
func TestWireTestsOverMessages(t *testing.T) { wiretest.RerunOverMessages(t) }

var quiet = wiretest.Quiet

type wire = wiretest.Wire

var (
	runWire   = wiretest.Run
	inBubble  = wiretest.InBubble
	startWire = wiretest.Start
	field     = wiretest.Field
	errCode   = wiretest.ErrCode
)
