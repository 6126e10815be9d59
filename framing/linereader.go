package framing

import (
	"bytes"
	"errors"
	"io"
	"strconv"
)

// DefaultMaxMessage is the default largest line LineReader returns: 16 MiB.
const DefaultMaxMessage = 16 << 20

// initialBuffer is the read buffer a LineReader starts with and shrinks back
// to after a large line; it is per connection, not per message.
const initialBuffer = 32 << 10

// ErrLineTooLong is matched (errors.Is) by the error ReadLine returns for a
// line over the limit.
var ErrLineTooLong = errors.New("framing: line exceeds the message size limit")

// LineTooLongError reports a line that was over the limit. The line has been
// discarded up to and including its '\n' without being buffered, and the
// reader is positioned on the next line (guarantee W4).
type LineTooLongError struct {
	Limit int
}

func (e *LineTooLongError) Error() string {
	return "framing: line exceeds the message size limit of " + strconv.Itoa(e.Limit) + " bytes"
}

func (e *LineTooLongError) Unwrap() error { return ErrLineTooLong }

// LineReader splits a byte stream into '\n'-terminated lines (guarantee W1). It
// strips one '\r' before the '\n', returns a final line that has no '\n' at
// EOF, and bounds memory: a line longer than the limit is skipped without
// being held, and reported as a *LineTooLongError.
//
// A LineReader is not safe for concurrent use; a connection has one reading
// goroutine at a time.
type LineReader struct {
	r          io.Reader
	buf        []byte
	start, end int // unread bytes are buf[start:end]
	scanned    int // buf[start:start+scanned] is known to hold no '\n'
	max        int
	err        error // sticky error from r
}

// NewLineReader returns a reader of lines of at most max bytes (not counting
// the terminator); max <= 0 means DefaultMaxMessage.
func NewLineReader(r io.Reader, max int) *LineReader {
	if max <= 0 {
		max = DefaultMaxMessage
	}
	return &LineReader{r: r, max: max}
}

// Limit returns the largest line ReadLine returns.
func (l *LineReader) Limit() int { return l.max }

// HasLine reports whether a whole line is already buffered, so that the next
// ReadLine returns without reading from the underlying reader. The runtime
// uses it to flush its output only when it is about to wait for input.
func (l *LineReader) HasLine() bool {
	if l.start == l.end {
		return false
	}
	if l.err != nil {
		return true
	}
	i := bytes.IndexByte(l.buf[l.start+l.scanned:l.end], '\n')
	if i < 0 {
		l.scanned = l.end - l.start
		return false
	}
	return true
}

// ReadLine returns the next line without its terminator. The slice is valid
// until the next call. At the end of the stream it returns io.EOF (or the
// reader's error); a final unterminated line is returned first.
func (l *LineReader) ReadLine() ([]byte, error) {
	for {
		if i := bytes.IndexByte(l.buf[l.start+l.scanned:l.end], '\n'); i >= 0 {
			n := l.scanned + i
			line := l.buf[l.start : l.start+n]
			l.start += n + 1
			l.scanned = 0
			if line = trimCR(line); len(line) > l.max {
				return nil, &LineTooLongError{Limit: l.max}
			}
			return line, nil
		}
		l.scanned = l.end - l.start
		if l.scanned > l.max+1 { // even a trailing '\r' cannot save it
			return nil, l.discardLine()
		}
		if l.err != nil {
			if l.start == l.end {
				return nil, l.err
			}
			line := trimCR(l.buf[l.start:l.end])
			l.start, l.end, l.scanned = 0, 0, 0
			if len(line) > l.max {
				return nil, &LineTooLongError{Limit: l.max}
			}
			return line, nil
		}
		l.fill()
	}
}

func trimCR(line []byte) []byte {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		return line[:n-1]
	}
	return line
}

// fill reads more input, first making room: it moves unread bytes to the
// front, grows the buffer for a long line, and shrinks it back after one.
func (l *LineReader) fill() {
	if l.buf == nil {
		l.buf = make([]byte, initialBuffer)
	}
	if l.start == l.end {
		l.start, l.end, l.scanned = 0, 0, 0
		if len(l.buf) > 4*initialBuffer {
			l.buf = make([]byte, initialBuffer)
		}
	}
	if l.end == len(l.buf) {
		if l.start > 0 {
			l.end = copy(l.buf, l.buf[l.start:l.end])
			l.start = 0
		}
		if l.end == len(l.buf) {
			size := 2 * len(l.buf)
			if limit := l.max + 2; size > limit {
				size = max(limit, len(l.buf)+1)
			}
			nb := make([]byte, size)
			copy(nb, l.buf[:l.end])
			l.buf = nb
		}
	}
	n, err := l.r.Read(l.buf[l.end:])
	l.end += n
	if err != nil {
		l.err = err
	} else if n == 0 {
		// A reader that returns 0, nil forever would spin; io.Reader
		// discourages it, and we treat a long run of them as a fault.
		for tries := 1; tries < 100 && n == 0 && err == nil; tries++ {
			n, err = l.r.Read(l.buf[l.end:])
			l.end += n
		}
		if n == 0 && err == nil {
			err = io.ErrNoProgress
		}
		l.err = err
	}
}

// discardLine drops the rest of an over-long line, reading and forgetting
// input until the next '\n', so the excess is never buffered.
func (l *LineReader) discardLine() error {
	tooLong := &LineTooLongError{Limit: l.max}
	l.start, l.end, l.scanned = 0, 0, 0
	if len(l.buf) > 4*initialBuffer {
		l.buf = make([]byte, initialBuffer)
	}
	for l.err == nil {
		n, err := l.r.Read(l.buf)
		if i := bytes.IndexByte(l.buf[:n], '\n'); i >= 0 {
			l.start, l.end = i+1, n
			l.err = err
			return tooLong
		}
		if err != nil {
			l.err = err
		} else if n == 0 {
			l.err = io.ErrNoProgress
		}
	}
	return tooLong
}
