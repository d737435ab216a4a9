// Package syncbuf is a bytes.Buffer that a child process writes to while
// others read it: tests, and sparkdap doctor keeping a probe's stderr.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is safe for one writer and many readers at once.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
