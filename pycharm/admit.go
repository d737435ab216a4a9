package pycharm

import (
	"bufio"
	"fmt"
	"net"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/connbudget"
)

// This file admits executor connections: the budget of connections not
// yet admitted, and hellos (token, session limit, PyCharm reachable).

// maxPendingHellos bounds the hellos waiting for their pydevd connection (a
// var for tests).
var maxPendingHellos = admission.DefaultMaxPending

// take holds a place in the budget for conn and returns the connection to
// serve in its stead, or closes conn unread and logs the refusal,
// rate-limited per cause.
func (p *Proxy) take(conn net.Conn) (place *connbudget.Place, served net.Conn, ok bool) {
	// Workers from there whose hello was accepted connect pydevd next.
	expected := p.admission.PendingFrom(admission.RemoteIP(conn.RemoteAddr().String()))
	place, served, err := p.budget.Take(conn, expected)
	if err == nil {
		return place, served, true
	}
	conn.Close()
	cause := "executor port: " + err.Error()
	p.logLimited(cause).Str("remote", conn.RemoteAddr().String()).Str("cause", cause).Int("limit", p.budget.Total()).
		Int("per_source", p.budget.PerSource()).Msg("too many connections not yet admitted; closing this one unread")
	return nil, nil, false
}

// shed logs a connection the budget closed because it proved nothing: the
// first of each cause per interval is a warning.
func (p *Proxy) shed(remote net.Addr, why, how string) {
	cause := "executor port: closed a connection that " + why + " " + how
	p.logLimited(cause).Str("remote", remote.String()).Str("cause", cause).
		Msg("many connections not yet admitted; closed one that proved nothing")
}

// logLimited is a warning for the first refusal of cause in an interval,
// a debug line for the rest (summed up by logLimit).
func (p *Proxy) logLimited(cause string) *zerolog.Event {
	if p.logLimit.Allow(cause) {
		return p.log.Warn()
	}
	return p.log.Debug()
}

// serveHello answers a hello (admission.ServeHello): token, session limit,
// PyCharm reachable (acceptHello). A watch connection is served until it
// ends, out of the budget of connections not yet admitted.
func (p *Proxy) serveHello(conn net.Conn, br *bufio.Reader, log zerolog.Logger, place *connbudget.Place) {
	send := func(b []byte) {
		// The first thing sent answers a whole hello line.
		place.Progressed()
		_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, _ = conn.Write(b)
	}
	_ = conn.SetDeadline(time.Now().Add(identifyTimeout))
	_ = admission.ServeHello(admission.HelloConn{Remote: conn.RemoteAddr().String(), Reader: br, Send: send, Log: log,
		Undebugged: p.tellPyCharm, Lost: func(rep admission.LossReport) { p.tellLoss(log, rep) },
		Watch: func(hello admission.Hello) (func() error, error) {
			wa, err := p.board.Admit(hello)
			if err != nil {
				return nil, err
			}
			place.Release()
			_ = conn.SetReadDeadline(time.Time{})
			return func() error { return wa.Serve(br, send) }, nil
		}}, p.admission, p.refusals, p.acceptHello)
}

// tellLoss tells of a worker's loss report (output its debugger could not
// send before the task ended, which the executor's log has): at Warn in
// serve's log and in PyCharm's console.
func (p *Proxy) tellLoss(log zerolog.Logger, rep admission.LossReport) {
	msg := rep.Message()
	log.Warn().Str("worker", rep.Label()).Int64("bytes", rep.Bytes).Int64("lines", rep.Lines).Msg(msg)
	p.tellPyCharm(msg)
}

// errPIDElsewhere refuses a hello whose pid another host's worker already
// debugs: pydevd's thread ids (pid_<pid>_id_<n>) would clash.
type errPIDElsewhere struct{ pid int64 }

func (e *errPIDElsewhere) Error() string {
	return fmt.Sprintf("pid %d is already debugged on another host (thread ids would clash)", e.pid)
}

// acceptHello admits a verified hello (its proof checked by Handshake;
// then PyCharm reachable, then the registry's caps) and returns the nonce
// its pydevd connection must show (an admission.Admit).
func (p *Proxy) acceptHello(ip string, hello admission.Hello) (nonce string, err error) {
	if err := p.ensurePyCharm(); err != nil {
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.execs[hello.PID]; ok && e.ip != ip {
		return "", &errPIDElsewhere{hello.PID}
	}
	return p.admission.AcceptNonce(ip, hello, len(p.execs))
}
