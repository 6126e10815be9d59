package rpc_test

import (
	"testing"

	"github.com/agentwire/agentwire/internal/wiretest"
)

func TestMain(m *testing.M) { leakCheckedMain(m) }

var quiet = wiretest.Quiet

type wire = wiretest.Wire

var (
	runWire   = wiretest.Run
	inBubble  = wiretest.InBubble
	startWire = wiretest.Start
	field     = wiretest.Field
	errCode   = wiretest.ErrCode
)
