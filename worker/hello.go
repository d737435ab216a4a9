package worker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sparkdap/sparkdap/pathmap"
)

// The hello is a one-line exchange the generated worker wrapper makes on the
// executor port just before its debugger connects:
//
//	wrapper → proxy:  SPARKDAP/1 {"token": …, "pid": …, "host": …, "roots": {…}, …}\n
//	proxy → wrapper:  SPARKDAP/1 OK[ <nonce>]\n   or   SPARKDAP/1 REFUSED <reason>\n
//
// It lets the proxy refuse (wrong token, session limit) before the worker
// loads a debugger at all, and tells it the worker's task label and code
// roots before the debugger's handshake, so breakpoints can be replayed to
// the right executor paths before the worker runs any user code. pydevd
// never speaks first, so the prefix tells a hello from a pydevd connection.
// The proxy may already have sent pydevd's first request when the hello
// arrives; the wrapper skips anything before its "SPARKDAP/1 " reply.
const HelloPrefix = "SPARKDAP/1 "

// maxHelloBytes bounds the hello line.
const maxHelloBytes = 64 << 10

// DefaultHelloTTL is how long an accepted hello waits for its debugger's
// connection.
const DefaultHelloTTL = 30 * time.Second

// Hello is what the wrapper says about its worker.
type Hello struct {
	Token string `json:"token"`
	TaskInfo
}

// TaskInfo is what the generated worker wrapper reports, in its hello and
// again whenever the worker starts another task: where the worker runs and
// which Spark task it is running.
type TaskInfo struct {
	ExecutorID    string         `json:"executorId"`
	Host          string         `json:"host"`
	PID           int64          `json:"pid"`
	StageID       *int64         `json:"stageId"`
	PartitionID   *int64         `json:"partitionId"`
	AttemptNumber *int64         `json:"attemptNumber"`
	TaskAttemptID *int64         `json:"taskAttemptId"`
	Label         string         `json:"label"`
	PostMortem    bool           `json:"postMortem"`
	Roots         *pathmap.Roots `json:"roots,omitempty"`
}

// Label names a worker for people: executor, host, pid and Spark task
// label, each where known, joined by " · ". Both front ends use it (the DAP
// flavour's child sessions and merged thread names, PyCharm's thread names).
// It cleans what it shows (TaskInfo.Clean), whoever filled t.
func Label(t TaskInfo) string {
	t = t.Clean()
	var parts []string
	if t.ExecutorID != "" {
		parts = append(parts, "exec "+t.ExecutorID)
	}
	if t.Host != "" {
		parts = append(parts, t.Host)
	}
	if t.PID != 0 {
		parts = append(parts, "pid "+strconv.FormatInt(t.PID, 10))
	}
	if t.Label != "" {
		parts = append(parts, t.Label)
	}
	return strings.Join(parts, " · ")
}

// IsHello reports whether the connection starts with a hello, without
// consuming anything otherwise. It blocks until the peer sends something,
// which pydevd does once the proxy's first request reaches it.
func IsHello(br *bufio.Reader) bool {
	b, err := br.Peek(len(HelloPrefix))
	return err == nil && string(b) == HelloPrefix
}

// ErrBadHello marks a hello line that cannot be used.
var ErrBadHello = errors.New("bad hello")

// ReadHello reads and parses the hello line. Its errors are ErrBadHello
// (errors.Is) unless reading failed.
func ReadHello(br *bufio.Reader) (Hello, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxHelloBytes {
			return Hello{}, fmt.Errorf("%w: longer than %d bytes", ErrBadHello, maxHelloBytes)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return Hello{}, fmt.Errorf("reading hello: %w", err)
		}
	}
	var h Hello
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimPrefix(line, []byte(HelloPrefix))))
	if err := dec.Decode(&h); err != nil {
		return Hello{}, fmt.Errorf("%w: malformed: %w", ErrBadHello, err)
	}
	if h.PID <= 0 {
		return Hello{}, fmt.Errorf("%w: no pid", ErrBadHello)
	}
	// What the cluster says is cleaned here, where it enters the proxy,
	// before any refusal line or view shows it.
	h.TaskInfo = h.TaskInfo.Clean()
	return h, nil
}

// Reply is the proxy's answer line to a hello: OK (with the nonce that
// binds the debugger's connection to it, when there is one) or REFUSED with
// the reason the wrapper logs.
func Reply(nonce string, refusal error) []byte {
	switch {
	case refusal != nil:
		return []byte(HelloPrefix + "REFUSED " + refusal.Error() + "\n")
	case nonce != "":
		return []byte(HelloPrefix + "OK " + nonce + "\n")
	}
	return []byte(HelloPrefix + "OK\n")
}
