package rpc

import (
	"testing"
	"unsafe"
)

// An HTTP server makes a pushed Conn per request, and a subscriptions/listen
// stream keeps its Conn for as long as it is open: the Conn is kept in the
// 640-byte size class (an object of more than 512 bytes with pointers
// carries an 8-byte header). The regression this pins: a Conn of 1024
// bytes that copied every option into itself, and kept a watchdog and
// a dozen counters a pushed connection never uses.
func TestAPushedConnFitsThe640ByteSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(Conn{}); n > 632 {
		t.Fatalf("a Conn is %d bytes, over 632: move what a pushed connection does not use out of it", n)
	}
}
