package liveview

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
)

// Terminal owns a terminal's writes: what is written to it (log lines)
// scrolls above the view, and Draw redraws the view in place below them.
type Terminal struct {
	mu    sync.Mutex
	out   io.Writer
	view  string
	drawn int    // lines of the view now on screen
	tail  []byte // a log line not yet ended
}

// NewTerminal draws on out, which must be a terminal that understands ANSI
// cursor movement.
func NewTerminal(out io.Writer) *Terminal { return &Terminal{out: out} }

// Write prints log output above the view. Partial lines wait for their end,
// so the view never splits one.
func (t *Terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tail = append(t.tail, p...)
	i := bytes.LastIndexByte(t.tail, '\n')
	if i < 0 {
		return len(p), nil
	}
	var buf bytes.Buffer
	t.erase(&buf)
	buf.Write(t.tail[:i+1])
	t.tail = append(t.tail[:0], t.tail[i+1:]...)
	t.paint(&buf)
	_, err := t.out.Write(buf.Bytes())
	return len(p), err
}

// Draw replaces the view.
func (t *Terminal) Draw(view string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.view = view
	var buf bytes.Buffer
	t.erase(&buf)
	t.paint(&buf)
	_, err := t.out.Write(buf.Bytes())
	return err
}

// Close leaves the last view on screen and the cursor below it.
func (t *Terminal) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.drawn = 0
	if len(t.tail) > 0 {
		_, err := t.out.Write(append(t.tail, '\n'))
		t.tail = nil
		return err
	}
	return nil
}

// erase moves to the view's first line and clears to the end of screen.
func (t *Terminal) erase(buf *bytes.Buffer) {
	if t.drawn > 0 {
		fmt.Fprintf(buf, "\x1b[%dA\r\x1b[J", t.drawn)
		t.drawn = 0
	}
}

func (t *Terminal) paint(buf *bytes.Buffer) {
	buf.WriteString(t.view)
	t.drawn = strings.Count(t.view, "\n")
}
