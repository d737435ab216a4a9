package selection

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sparkdap/sparkdap/admission"
)

// maxReportBytes bounds one line a worker sends on its watch connection:
// a task's four numbers and a flag.
const maxReportBytes = 1 << 10

// ErrBadReport is a line on a watch connection that is not a report.
var ErrBadReport = errors.New("bad watch report")

// Watch is one admitted watch connection, between Admit and the end of
// Serve.
type Watch struct {
	b *Board
	w *watcher
}

// Admit registers the worker of a verified watch hello, before the reply:
// ErrTooManyWatchers past the Board's bound. The caller replies, then
// runs Serve; Serve (or Cancel, if the reply failed) unregisters it.
func (b *Board) Admit(hello admission.Hello) (*Watch, error) {
	// Cleaned here too, as the TaskInfo is: a caller's hello need not
	// have come through admission.ReadHello.
	t := hello.TaskInfo.Clean()
	version := admission.Clean(hello.SparkdapVersion, admission.MaxVersionRunes)
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.watchers) >= b.max {
		return nil, fmt.Errorf("%w (%d)", ErrTooManyWatchers, b.max)
	}
	b.nextID++
	w := &watcher{id: b.nextID, wake: make(chan struct{}, 1),
		info: Worker{ExecutorID: t.ExecutorID, Host: t.Host, PID: t.PID, Since: b.now(), SparkdapVersion: version}}
	b.watchers[w] = struct{}{}
	return &Watch{b: b, w: w}, nil
}

// Cancel unregisters a watch that will not be served.
func (wa *Watch) Cancel() {
	wa.b.mu.Lock()
	delete(wa.b.watchers, wa.w)
	wa.b.mu.Unlock()
}

// Serve follows the worker's reports on r until the connection ends or
// breaks the protocol, sending it the current selection now and after
// every change through send, on a goroutine of its own that it waits for
// before it returns. send must not block for long (a write queue, or a
// write deadline); the caller closes the connection after Serve, which
// also ends a send that blocks. It returns why the connection ended: nil
// for EOF, ErrBadReport (errors.Is) for a line that is no report.
//
// Once served, the worker is listed as finished (Board.Finished).
func (wa *Watch) Serve(r *bufio.Reader, send func([]byte)) error {
	defer wa.finish()
	wa.b.update() // a worker joined
	done := make(chan struct{})
	writerDone := make(chan struct{})
	select {
	case wa.w.wake <- struct{}{}: // the current selection, first
	default: // a Set since Admit asked for it already
	}
	go func() {
		defer close(writerDone)
		for {
			select {
			case <-done:
				return
			case <-wa.w.wake:
				send(wa.b.selectLine())
			}
		}
	}()
	err := wa.read(r)
	close(done)
	<-writerDone
	return err
}

// read applies the worker's reports until the connection ends.
func (wa *Watch) read(r *bufio.Reader) error {
	for {
		line, err := readLine(r)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := wa.apply(line); err != nil {
			return err
		}
	}
}

func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > maxReportBytes {
			return nil, fmt.Errorf("%w: a line longer than %d bytes", ErrBadReport, maxReportBytes)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return bytes.TrimRight(line, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, fmt.Errorf("%w: a line cut short", ErrBadReport)
		}
		return nil, err
	}
}

// taskReport is a TASK line's JSON.
type taskReport struct {
	StageID       *int64 `json:"stageId"`
	PartitionID   *int64 `json:"partitionId"`
	AttemptNumber *int64 `json:"attemptNumber"`
	TaskAttemptID *int64 `json:"taskAttemptId"`
	Selected      bool   `json:"selected"`
}

// apply applies one report line.
func (wa *Watch) apply(line []byte) error {
	rest, ok := bytes.CutPrefix(line, []byte(admission.HelloPrefix))
	if !ok {
		return fmt.Errorf("%w: no %q", ErrBadReport, admission.HelloPrefix)
	}
	b := wa.b
	if string(rest) == "IDLE" {
		b.mu.Lock()
		wa.w.info.Running = false
		wa.w.info.Since = b.now()
		wa.changedLocked()
		return nil
	}
	body, ok := bytes.CutPrefix(rest, []byte("TASK "))
	if !ok {
		return fmt.Errorf("%w: neither TASK nor IDLE", ErrBadReport)
	}
	var rep taskReport
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return fmt.Errorf("%w: %w", ErrBadReport, err)
	}
	if rep.StageID == nil || rep.PartitionID == nil || rep.AttemptNumber == nil || rep.TaskAttemptID == nil {
		return fmt.Errorf("%w: a task report lacks stageId, partitionId, attemptNumber or taskAttemptId", ErrBadReport)
	}
	t := &Task{Stage: *rep.StageID, Partition: *rep.PartitionID, Attempt: *rep.AttemptNumber, TaskAttemptID: *rep.TaskAttemptID}
	b.mu.Lock()
	wa.w.info.Running = true
	wa.w.info.Task = t
	wa.w.info.Selected = rep.Selected
	wa.w.info.Since = b.now()
	wa.w.info.Tasks++
	wa.changedLocked()
	return nil
}

// changedLocked releases the Board's lock, then tells OnChange's func
// the worker's new state.
func (wa *Watch) changedLocked() {
	b := wa.b
	f, w := b.changed, wa.w.info
	if w.Task != nil {
		t := *w.Task
		w.Task = &t
	}
	b.mu.Unlock()
	if f != nil {
		f(w)
	}
	b.update()
}
