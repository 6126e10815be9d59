package framing_test

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/agentwire/agentwire/framing"
)

func ExampleLineReader() {
	in := "first\r\n" + strings.Repeat("x", 100) + "\nlast"
	lr := framing.NewLineReader(strings.NewReader(in), 64)
	for {
		line, err := lr.ReadLine()
		switch {
		case errors.Is(err, framing.ErrLineTooLong):
			fmt.Println("skipped:", err)
			continue
		case err == io.EOF:
			return
		}
		fmt.Printf("%q\n", line)
	}
	// Output:
	// "first"
	// skipped: framing: line exceeds the message size limit of 64 bytes
	// "last"
}
