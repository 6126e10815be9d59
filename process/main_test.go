package process_test

import (
	"testing"

	"github.com/agentwire/agentwire/internal/testserver"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	testserver.Run()
	goleak.VerifyTestMain(m)
}
