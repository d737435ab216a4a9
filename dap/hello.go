package dap

import (
	"bufio"
	"errors"
	"fmt"
	"net"

	"github.com/sparkdap/sparkdap/pathmap"
	"github.com/sparkdap/sparkdap/worker"
)

// The worker's hello, its task info and admission are package worker's
// (the PyCharm front end shares them); these names are kept for dap's own
// API (ExecutorStatus.Task, PathReport.Roots).
type (
	// TaskInfo is what the worker wrapper reports about its task.
	TaskInfo = worker.TaskInfo
	// Roots are where one executor loads code from.
	Roots = pathmap.Roots
)

// HelloPrefix starts a worker's hello line (see package worker).
const HelloPrefix = worker.HelloPrefix

// DefaultHelloTTL is how long a hello waits for its pydevd connection.
const DefaultHelloTTL = worker.DefaultHelloTTL

// helloKey is where a hello waits: pydevd's handshake tells the pid, the
// connection the address.
func helloKey(remote string, pid int64) (key, ip string) {
	ip, _, _ = net.SplitHostPort(remote)
	return worker.AddrKey(ip, pid), ip
}

// acceptHello decides on a hello and, if accepted, keeps it for the pydevd
// connection of the same process. It returns nil or the refusal.
func (h *Hub) acceptHello(remote string, hello worker.Hello) error {
	key, ip := helloKey(remote, hello.PID)
	// Under the lock so the executor count stays still while the registry
	// counts it against the session limit.
	tx := h.lock()
	defer tx.unlock()
	return h.admission.Accept(key, ip, hello, len(tx.executors))
}

// claimHello takes the hello of the process behind a pydevd
// connection (ok), if the connection presented that hello's pydevd token.
// A hello pending for the pid under another token stays for its own
// worker's debugger (worker.Registry.ClaimWithToken) and the connection is
// refused (err); with none pending, both are zero and the caller checks
// the connection as a plain debugpy.connect.
func (tx *held) claimHello(remote string, pid int64, token string) (hello worker.Hello, ok bool, err error) {
	h := tx.h
	key, ip := helloKey(remote, pid)
	hello, err = h.admission.ClaimWithToken(key, ip, pid, token)
	switch {
	case errors.Is(err, worker.ErrNotPending):
		return worker.Hello{}, false, nil
	case err != nil:
		return worker.Hello{}, false, err
	}
	return hello, true, nil
}

// serveHello answers a hello connection and closes it.
func (es *ExecutorSession) serveHello(br *bufio.Reader) error {
	hello, err := es.hub.admission.Handshake(br, es.w.sendRaw)
	if err != nil {
		// A refusal's line is printed only if it is the first from its
		// address in a while (refusedLine); the reply always goes out, so
		// the worker falls back to running undebugged at once.
		level := es.logger().Debug()
		line := fmt.Sprintf("worker at %s sent a bad hello; it runs undebugged", es.remote)
		if errors.Is(err, worker.ErrBadProof) || errors.Is(err, worker.ErrNoToken) || errors.Is(err, worker.ErrOldHello) {
			line = fmt.Sprintf("worker from %s refused: %v; it runs undebugged", es.remote, err)
			es.hub.refused.Add(1)
		}
		if es.hub.refusedLine(es.remote, line) {
			level = es.logger().Warn()
		}
		level.Err(err).Msg("hello refused; the worker runs undebugged")
		if !errors.Is(err, worker.ErrOldHello) {
			es.w.sendRaw(worker.Reply("", err))
		}
		es.w.closeAfterFlush(err)
		// Still a hello connection, never a debug session: no handshake
		// failure to report on top of the refusal.
		return fmt.Errorf("%w: %w", errHelloDone, err)
	}
	if err := es.hub.acceptHello(es.remote, hello); err != nil {
		// hello's fields are clean (ReadHello); the line is printed only if
		// it is the first from its address in a while.
		level := es.logger().Debug()
		if es.hub.refusedLine(es.remote, fmt.Sprintf("worker %s pid %d refused: %v; it runs undebugged", hello.Host, hello.PID, err)) {
			level = es.logger().Warn()
		}
		level.Str("reason", err.Error()).Int64("pid", hello.PID).Str("host", hello.Host).
			Msg("worker refused; it runs undebugged")
		es.hub.refused.Add(1)
		es.w.sendRaw(worker.Reply("", err))
	} else {
		es.logger().Debug().Int64("pid", hello.PID).Str("label", hello.Label).Msg("hello accepted")
		es.w.sendRaw(worker.Reply("", nil))
	}
	es.w.closeAfterFlush(errHelloDone)
	return errHelloDone
}

// errHelloDone ends a hello connection: it was never a debug session.
var errHelloDone = errors.New("hello answered")

// remoteIP is the address part of a connection's remote address, as the
// admission registry keys a hello's origin.
func remoteIP(remote string) string {
	ip, _, _ := net.SplitHostPort(remote)
	return ip
}
