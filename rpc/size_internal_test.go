package rpc

import (
	"testing"
	"unsafe"
)

// An HTTP server makes a pushed Conn per request, and a subscriptions/listen
// stream keeps its Conn for as long as it is open: the Conn is kept in the
// 768-byte size class (an object of more than 512 bytes with pointers
// carries an 8-byte header). The regression this pins: a Conn of 1024
// bytes that copied every option into itself.
func TestAPushedConnFitsThe768ByteSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(Conn{}); n > 760 {
		t.Fatalf("a Conn is %d bytes, over 760: move what a pushed connection does not use out of it", n)
	}
}
