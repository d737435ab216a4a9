package dap

import (
	"bufio"
	"errors"
	"fmt"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/pathmap"
)

// The worker's hello, its task info and admission are package admission's
// (the PyCharm front end shares them); these names are kept for dap's own
// API (ExecutorStatus.Task, PathReport.Roots).
type (
	// TaskInfo is what the worker wrapper reports about its task.
	TaskInfo = admission.TaskInfo
	// Roots are where one executor loads code from.
	Roots = pathmap.Roots
)

// HelloPrefix starts a worker's hello line (see package admission).
const HelloPrefix = admission.HelloPrefix

// DefaultHelloTTL is how long a hello waits for its pydevd connection.
const DefaultHelloTTL = admission.DefaultHelloTTL

// helloKey is where a hello waits: pydevd's handshake tells the pid, the
// connection the address.
func helloKey(remote string, pid int64) (key, ip string) {
	ip = admission.RemoteIP(remote)
	return admission.AddrKey(ip, pid), ip
}

// acceptHello decides on a verified hello from ip and, if accepted, keeps
// it for the pydevd connection of the same process (an admission.Admit; no
// nonce: the pydevd connection names its pid).
func (h *Hub) acceptHello(ip string, hello admission.Hello) (nonce string, err error) {
	// Under the lock so the executor count stays still while the registry
	// counts it against the session limit.
	tx := h.lock()
	defer tx.unlock()
	return "", h.admission.Accept(admission.AddrKey(ip, hello.PID), ip, hello, len(tx.executors))
}

// claimHello takes the hello of the process behind a pydevd
// connection (ok), if the connection presented that hello's pydevd token.
// A hello pending for the pid under another token stays for its own
// worker's debugger (admission.Registry.ClaimWithToken) and the connection is
// refused (err); with none pending, both are zero and the caller checks
// the connection as a plain debugpy.connect.
func (tx *held) claimHello(remote string, pid int64, token string) (hello admission.Hello, ok bool, err error) {
	h := tx.h
	key, ip := helloKey(remote, pid)
	hello, err = h.admission.ClaimWithToken(key, ip, pid, token)
	switch {
	case errors.Is(err, admission.ErrNotPending):
		return admission.Hello{}, false, nil
	case err != nil:
		return admission.Hello{}, false, err
	}
	return hello, true, nil
}

// serveHello answers a hello connection (admission.ServeHello) and closes it
// once the reply is out, or once a watch connection ends: that one stops
// the pydevd handshake hs runs and leaves the budget of connections not
// yet admitted.
func (es *ExecutorSession) serveHello(br *bufio.Reader, hs *handshakeRun) error {
	send := es.w.sendRaw
	if p := es.progressed; p != nil {
		// The first thing sent answers a whole hello line.
		send = func(b []byte) { p(); es.w.sendRaw(b) }
	}
	err := admission.ServeHello(admission.HelloConn{Remote: es.remote, Reader: br, Send: send, Log: *es.logger(),
		Undebugged: es.hub.tellIDE, Lost: es.tellLoss, Watch: func(hello admission.Hello) (func() error, error) {
			wa, err := es.hub.board.Admit(hello)
			if err != nil {
				return nil, err
			}
			hs.watching.Store(true)
			hs.cancel()
			if es.unadmitted != nil {
				es.unadmitted()
			}
			return func() error { return wa.Serve(br, es.w.sendRaw) }, nil
		}}, es.hub.admission, es.hub.refusals, es.hub.acceptHello)
	// Still a hello connection, never a debug session: no handshake
	// failure to report on top of a refusal.
	if err != nil {
		err = fmt.Errorf("%w: %w", errHelloDone, err)
	} else {
		err = errHelloDone
	}
	es.w.closeAfterFlush(err)
	return err
}

// tellLoss tells of a worker's loss report (output its debugger could
// not send before the task ended, which the executor's log has): at Warn
// in serve's log and in the IDE's console.
func (es *ExecutorSession) tellLoss(rep admission.LossReport) {
	msg := rep.Message()
	es.logger().Warn().Str("worker", rep.Label()).Int64("bytes", rep.Bytes).Int64("lines", rep.Lines).Msg(msg)
	es.hub.tellIDE(msg)
}

// errHelloDone ends a hello connection: it was never a debug session.
var errHelloDone = errors.New("hello answered")
