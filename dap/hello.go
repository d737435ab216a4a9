package dap

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// The hello is a one-line exchange the generated worker wrapper makes on the
// executor port just before debugpy.connect:
//
//	wrapper → proxy:  SPARKDAP/1 {"token": …, "pid": …, "host": …, "roots": {…}, …}\n
//	proxy → wrapper:  SPARKDAP/1 OK\n   or   SPARKDAP/1 REFUSED <reason>\n
//
// It lets the proxy refuse (wrong token, session limit) before the worker
// loads a debugger at all, and tells it the worker's task label and code
// roots before pydevd's handshake, so breakpoints can be replayed to the
// right executor paths before the worker runs any user code. pydevd never
// speaks first, so the prefix tells a hello from a pydevd connection. The
// proxy may already have sent pydevd's first request when the hello
// arrives; the wrapper skips anything before its "SPARKDAP/1 " reply.
const HelloPrefix = "SPARKDAP/1 "

// maxHelloBytes bounds the hello line.
const maxHelloBytes = 64 << 10

// DefaultHelloTTL is how long a hello waits for its pydevd connection.
const DefaultHelloTTL = 30 * time.Second

// maxPendingHellos bounds hellos waiting for their pydevd connection.
const maxPendingHellos = 10000

// Hello is what the wrapper says about its worker.
type Hello struct {
	Token string `json:"token"`
	TaskInfo
}

type helloKey struct {
	ip  string
	pid int64
}

type pendingHello struct {
	hello Hello
	timer *time.Timer // expires it after Config.HelloTTL
}

// IsHello reports whether the connection starts with a hello, without
// consuming anything otherwise. It blocks until the peer sends something,
// which pydevd does once the proxy's first request reaches it.
func IsHello(br *bufio.Reader) bool {
	b, err := br.Peek(len(HelloPrefix))
	return err == nil && string(b) == HelloPrefix
}

// ReadHello reads and parses the hello line. Both front ends (DAP and
// PyCharm) use it.
func ReadHello(br *bufio.Reader) (Hello, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxHelloBytes {
			return Hello{}, fmt.Errorf("hello longer than %d bytes", maxHelloBytes)
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
		return Hello{}, fmt.Errorf("malformed hello: %w", err)
	}
	if h.PID <= 0 {
		return Hello{}, errors.New("hello without a pid")
	}
	return h, nil
}

// acceptHello decides on a hello and, if accepted, keeps it for the pydevd
// connection of the same process. It returns "" or the refusal reason.
func (h *Hub) acceptHello(remote string, hello Hello) string {
	if h.cfg.Token != "" && subtle.ConstantTimeCompare([]byte(hello.Token), []byte(h.cfg.Token)) != 1 {
		if hello.Token == "" {
			return "no access token"
		}
		return "wrong access token"
	}
	ip, _, _ := net.SplitHostPort(remote)
	h.mu.Lock()
	defer h.mu.Unlock()
	key := helloKey{ip, hello.PID}
	old, again := h.hellos[key]
	if !again {
		if len(h.hellos) >= maxPendingHellos {
			return "too many workers connecting at once"
		}
		if h.cfg.MaxSessions > 0 && len(h.executors)+len(h.hellos) >= h.cfg.MaxSessions {
			return fmt.Sprintf("session limit reached (--max-sessions %d)", h.cfg.MaxSessions)
		}
	} else {
		old.timer.Stop()
	}
	hello.Token = ""
	p := &pendingHello{hello: hello}
	// A timer per hello rather than a sweep on the next hello: a worker
	// whose debugpy.connect never came must not hold a session slot, or
	// memory, until someone else says hello.
	p.timer = time.AfterFunc(h.cfg.HelloTTL, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.hellos[key] == p {
			delete(h.hellos, key)
		}
	})
	h.hellos[key] = p
	return ""
}

// claimHello takes the hello of the process behind a pydevd connection.
// Callers hold h.mu.
func (h *Hub) claimHelloLocked(remote string, pid int64) (Hello, bool) {
	ip, _, _ := net.SplitHostPort(remote)
	key := helloKey{ip, pid}
	p, ok := h.hellos[key]
	if !ok {
		return Hello{}, false
	}
	p.timer.Stop()
	delete(h.hellos, key)
	return p.hello, true
}

// serveHello answers a hello connection and closes it.
func (es *ExecutorSession) serveHello(br *bufio.Reader) error {
	hello, err := ReadHello(br)
	if err != nil {
		es.logger().Warn().Err(err).Msg("bad hello")
		es.w.sendRaw([]byte(HelloPrefix + "REFUSED bad hello\n"))
		es.w.closeAfterFlush(err)
		return err
	}
	reason := es.hub.acceptHello(es.remote, hello)
	if reason != "" {
		es.logger().Warn().Str("reason", reason).Int64("pid", hello.PID).Str("host", hello.Host).
			Msg("worker refused; it runs undebugged")
		es.hub.summary("worker %s pid %d refused: %s; it runs undebugged", hello.Host, hello.PID, reason)
		es.hub.refused.Add(1)
		es.w.sendRaw([]byte(HelloPrefix + "REFUSED " + reason + "\n"))
	} else {
		es.logger().Debug().Int64("pid", hello.PID).Str("label", hello.Label).Msg("hello accepted")
		es.w.sendRaw([]byte(HelloPrefix + "OK\n"))
	}
	es.w.closeAfterFlush(errHelloDone)
	return errHelloDone
}

// errHelloDone ends a hello connection: it was never a debug session.
var errHelloDone = errors.New("hello answered")
