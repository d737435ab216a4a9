package admission

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

// The hello is the exchange the generated worker wrapper makes on the
// executor port just before its debugger connects: a challenge–response in
// which the proxy and then the worker prove they know the token (see
// challenge.go for the lines), then the worker's description,
//
//	wrapper → proxy:  SPARKDAP/2 {"proof": …, "pid": …, "host": …, "roots": {…}, …}\n
//	proxy → wrapper:  SPARKDAP/2 OK[ <nonce>]\n   or   SPARKDAP/2 REFUSED <reason>\n
//
// It lets the proxy refuse (wrong token, session limit) before the worker
// loads a debugger at all, and tells it the worker's task label and code
// roots before the debugger's handshake, so breakpoints can be replayed to
// the right executor paths before the worker runs any user code. pydevd
// never speaks first, so the prefix tells a hello from a pydevd connection.
// The proxy may already have sent pydevd's first request when the hello
// arrives; the wrapper skips anything before each "SPARKDAP/2 " line.
const HelloPrefix = "SPARKDAP/2 "

// maxHelloBytes bounds the hello's description line, which comes before
// its proof is checked: its roots list the worker's sys.path, which a job
// with many --py-files makes long.
const maxHelloBytes = 64 << 10

// DefaultHelloTTL is how long an accepted hello waits for its debugger's
// connection.
const DefaultHelloTTL = 30 * time.Second

// Hello is what the wrapper says about its worker: its proof of the token
// (never the token itself) and its task.
type Hello struct {
	Proof string `json:"proof"`
	TaskInfo
	// Undebugged, when set, is why the worker cannot load a debugger (none
	// installed, or one lacking what the wrapper needs): the hello then
	// only tells the proxy that, so that serve and the IDE say it, and is
	// refused (ErrUndebugged).
	Undebugged string `json:"undebugged,omitempty"`
	// Watch, when set, says the connection follows the live selection
	// (package selection) for the worker's life: it holds no debugger
	// session and is no session's hello.
	Watch bool `json:"watch,omitempty"`
	// SparkdapVersion is the sparkdap release that generated the worker's
	// wrapper (baked into it by `sparkdap wrap`), "" for a wrapper from
	// before it was baked. Both hellos carry it, so that `sparkdap doctor`
	// can tell a job still running another release's wrapper from one
	// running serve's. Cleaned and capped (MaxVersionRunes) by ReadHello.
	SparkdapVersion string `json:"sparkdapVersion,omitempty"`

	// Set by Registry.Handshake once Proof checked out (and Proof cleared):
	// Accept takes nothing else, and a pending hello admits only a pydevd
	// connection that presents pydevdToken.
	verified    bool
	pydevdToken string
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
	// Any version, so that an outdated wrapper is told why it is refused.
	b, err := br.Peek(len(helloVersionPrefix))
	return err == nil && string(b) == helloVersionPrefix
}

// ErrBadHello marks a hello line that cannot be used.
var ErrBadHello = errors.New("bad hello")

// ReadHello reads and parses the worker's description line (the second
// line of a hello; Registry.Handshake reads the first). Its errors are
// ErrBadHello (errors.Is) unless reading failed. The Hello it returns is
// not verified.
func ReadHello(br *bufio.Reader) (Hello, error) {
	line, err := readLine(br, maxHelloBytes)
	if err != nil {
		return Hello{}, err
	}
	if !bytes.HasPrefix(line, []byte(HelloPrefix)) {
		return Hello{}, fmt.Errorf("%w: no %q", ErrBadHello, HelloPrefix)
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
	h.Undebugged = Clean(h.Undebugged, MaxMessageRunes)
	h.SparkdapVersion = Clean(h.SparkdapVersion, MaxVersionRunes)
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
