// Package watchtest is a worker's side of a watch connection (package
// selection) written in Go, for tests of the proxy: it says the hello as
// the wrapper does, reads the selections the proxy pushes and reports
// tasks. The wrapper's own side is Python (workerwrap).
package watchtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/selection"
)

// Follower is one watch connection. Its methods are for one goroutine.
type Follower struct {
	conn net.Conn
	br   *bufio.Reader
}

// Dial opens a watch connection to the executor port at addr and says
// its hello; the proxy's reply must be OK.
func Dial(addr, token string, info admission.TaskInfo) (*Follower, error) {
	return DialHello(addr, token, admission.Hello{TaskInfo: info})
}

// DialHello is Dial with the whole hello (its Watch set here): for a
// test of what else a wrapper's hello says, such as its sparkdap version.
func DialHello(addr, token string, hello admission.Hello) (*Follower, error) {
	hello.Watch = true
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	reply, _, _, _, err := admission.IntroduceBuffered(br, conn, token, hello)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if reply != "OK" {
		conn.Close()
		return nil, fmt.Errorf("watch hello: %s", reply)
	}
	_ = conn.SetDeadline(time.Time{})
	return &Follower{conn: conn, br: br}, nil
}

// Next reads the next selection the proxy sends, nil for the one the job
// was submitted with, waiting at most timeout.
func (f *Follower) Next(timeout time.Duration) (*selection.Selection, error) {
	_ = f.conn.SetReadDeadline(time.Now().Add(timeout))
	for {
		line, err := f.br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		i := strings.Index(line, admission.HelloPrefix+"SELECT ")
		if i < 0 {
			continue // pydevd's first request, sent before the hello
		}
		var sel *selection.Selection
		if err := json.Unmarshal([]byte(line[i+len(admission.HelloPrefix+"SELECT "):]), &sel); err != nil {
			return nil, fmt.Errorf("SELECT line %q: %w", line, err)
		}
		return sel, nil
	}
}

// Task reports a task start.
func (f *Follower) Task(stage, partition, attempt, taskAttemptID int64, selected bool) error {
	b, _ := json.Marshal(map[string]any{"stageId": stage, "partitionId": partition, "attemptNumber": attempt,
		"taskAttemptId": taskAttemptID, "selected": selected})
	return f.send(admission.HelloPrefix + "TASK " + string(b) + "\n")
}

// Idle reports the end of a task.
func (f *Follower) Idle() error { return f.send(admission.HelloPrefix + "IDLE\n") }

// Send sends a raw line (for tests of bad reports).
func (f *Follower) Send(line string) error { return f.send(line) }

func (f *Follower) send(s string) error {
	_ = f.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := f.conn.Write([]byte(s))
	return err
}

// Close closes the connection.
func (f *Follower) Close() error { return f.conn.Close() }
