package admission

import (
	"bufio"
	"errors"
	"fmt"

	"github.com/rs/zerolog"
)

// HelloConn is one hello connection as a front end hands it to ServeHello.
type HelloConn struct {
	// Remote is the peer's address (host:port): refusal lines name it, and
	// RemoteIP of it is where the hello comes from.
	Remote string
	// Reader reads the connection; IsHello said it starts with a hello.
	Reader *bufio.Reader
	// Send writes to the peer: the challenge, then the reply. It must
	// not block for long (a write queue, or a write deadline).
	Send func([]byte)
	// Log gets one line per hello: Warn for a refusal the RefusalLog
	// printed, else Debug.
	Log zerolog.Logger
	// Undebugged, if set, gets the line of a worker that said it cannot
	// load a debugger, when the RefusalLog printed it: the front end tells
	// the IDE. It runs on the caller's goroutine, under no lock of this
	// package.
	Undebugged func(line string)
	// Lost, if set, gets a verified loss report (LossReport.Message says
	// it), once per report: the front end logs it and tells the IDE. It
	// runs on the caller's goroutine, under no lock of this package.
	Lost func(LossReport)
	// Watch, if set, takes a verified watch hello (Hello.Watch): it
	// registers the worker or refuses it, and returns what serves the
	// connection once the reply is out. Without it such a hello is
	// refused (ErrNoWatch). It runs on the caller's goroutine, under no
	// lock of this package, as does serve.
	Watch func(Hello) (serve func() error, err error)
}

// ErrNoWatch refuses a watch hello on a front end that has no live
// selection: the worker decides on the selection it was submitted with.
var ErrNoWatch = errors.New("this proxy has no live selection")

// ErrWatchEnded is what ServeHello returns once a watch connection it
// served ended, wrapping why if it broke the protocol.
var ErrWatchEnded = errors.New("watch connection ended")

// ErrUndebugged refuses a hello that said the worker cannot load a
// debugger (Hello.Undebugged): it is told, and holds no session.
var ErrUndebugged = errors.New("noted: the worker runs undebugged")

// Admit admits a verified hello from ip (RemoteIP of the connection): it
// returns the nonce for the reply ("" for none) or the refusal. The front
// end keeps the hello in its Registry under the key it finds it again by
// (Accept with AddrKey, or AcceptNonce), under the lock that keeps its
// session count still, and adds its own conditions.
type Admit func(ip string, hello Hello) (nonce string, err error)

// ServeHello answers a hello for a front end: the challenge–response
// (reg.Handshake), admission (admit), the reply, and the refusal's count
// and lines in refusals (the first from an address in a while printed,
// the rest summed up). The reply always goes out (an old hello's refusal
// already has), so a refused worker falls back to running undebugged at
// once. It returns nil when the worker was admitted, else why not; the
// caller closes the connection after the reply.
//
// A worker that failed the token check or was refused by admit is
// counted (RefusalLog.Count); a hello that could not be read or parsed
// is not (it may be no worker at all), though its line is printed alike.
//
// A connection that starts with a worker's loss report (LossPrefix) gets
// no reply: a verified report goes to c.Lost, once; one that does not
// verify is noted as a refused hello. ServeHello returns ErrLossReport
// then, wrapping ReadLoss's error if any.
//
// A watch hello (Hello.Watch) goes to c.Watch, and ServeHello serves the
// connection until it ends, then returns ErrWatchEnded.
func ServeHello(c HelloConn, reg *Registry, refusals *RefusalLog, admit Admit) error {
	ip := RemoteIP(c.Remote)
	hello, err := reg.Handshake(c.Reader, c.Send)
	if errors.Is(err, ErrProbe) {
		// Answered; the prober is no worker (sparkdap doctor, say).
		c.Log.Debug().Str("remote", c.Remote).Msg("port probe answered")
		return err
	}
	if errors.Is(err, ErrLossReport) {
		if err := serveLoss(c, reg, refusals, ip); err != nil {
			return fmt.Errorf("%w: %w", ErrLossReport, err)
		}
		return ErrLossReport
	}
	if err != nil {
		var printed bool
		if errors.Is(err, ErrBadProof) || errors.Is(err, ErrNoToken) || errors.Is(err, ErrOldHello) {
			printed = refusals.Refused(ip, fmt.Sprintf("worker from %s refused: %v; it runs undebugged", c.Remote, err))
		} else {
			// A parse error may quote the peer's bytes.
			printed = refusals.Noted(ip, fmt.Sprintf("worker at %s: hello refused (%s); it runs undebugged", c.Remote, Clean(err.Error(), MaxMessageRunes)))
		}
		level(c.Log, printed).Err(err).Msg("hello refused; the worker runs undebugged")
		if !errors.Is(err, ErrOldHello) {
			c.Send(Reply("", err))
		}
		return err
	}
	if hello.Undebugged != "" {
		// hello's fields are clean (ReadHello).
		line := fmt.Sprintf("worker %s pid %d runs undebugged: %s", hello.Host, hello.PID, hello.Undebugged)
		printed := refusals.Undebugged(ip, hello.Undebugged, line)
		level(c.Log, printed).Str("reason", hello.Undebugged).Int64("pid", hello.PID).Str("host", hello.Host).
			Msg("worker cannot load a debugger; it runs undebugged")
		if printed && c.Undebugged != nil {
			c.Undebugged(line)
		}
		c.Send(Reply("", ErrUndebugged))
		return ErrUndebugged
	}
	if hello.Watch {
		return serveWatch(c, hello)
	}
	nonce, err := admit(ip, hello)
	if err != nil {
		// hello's fields are clean (ReadHello).
		printed := refusals.Refused(ip, fmt.Sprintf("worker %s pid %d refused: %v; it runs undebugged", hello.Host, hello.PID, err))
		level(c.Log, printed).Str("reason", err.Error()).Int64("pid", hello.PID).Str("host", hello.Host).
			Msg("worker refused; it runs undebugged")
		c.Send(Reply("", err))
		return err
	}
	c.Log.Debug().Int64("pid", hello.PID).Str("label", hello.Label).Msg("hello accepted")
	c.Send(Reply(nonce, nil))
	return nil
}

// serveWatch answers a watch hello and serves the connection while it
// lasts.
func serveWatch(c HelloConn, hello Hello) error {
	var run func() error
	err := ErrNoWatch
	if c.Watch != nil {
		run, err = c.Watch(hello)
	}
	if err != nil {
		c.Log.Debug().Err(err).Int64("pid", hello.PID).Str("host", hello.Host).Msg("watch refused; the worker keeps the selection it was submitted with")
		c.Send(Reply("", err))
		return err
	}
	c.Log.Debug().Int64("pid", hello.PID).Str("host", hello.Host).Msg("worker watches the selection")
	c.Send(Reply("", nil))
	if err := run(); err != nil {
		return fmt.Errorf("%w: %w", ErrWatchEnded, err)
	}
	return ErrWatchEnded
}

// serveLoss reads a loss report (Registry.ReadLoss) and hands it to the
// front end (c.Lost) the first time it comes; it sends nothing back. A
// report that does not verify is noted as a refused hello is: counted when
// its proof is wrong, its line printed unless its address's are summed up.
func serveLoss(c HelloConn, reg *Registry, refusals *RefusalLog, ip string) error {
	rep, first, err := reg.ReadLoss(c.Reader, c.Remote)
	if err != nil {
		var printed bool
		if errors.Is(err, ErrLossProof) {
			printed = refusals.Refused(ip, fmt.Sprintf("loss report from %s refused: %v", c.Remote, err))
		} else {
			// Never the peer's bytes raw.
			printed = refusals.Noted(ip, fmt.Sprintf("loss report from %s refused (%s)", c.Remote, Clean(err.Error(), MaxMessageRunes)))
		}
		level(c.Log, printed).Err(err).Msg("loss report refused")
		return err
	}
	if !first {
		c.Log.Debug().Int64("bytes", rep.Bytes).Int64("lines", rep.Lines).Msg("loss report repeated; reported already")
		return nil
	}
	if c.Lost != nil {
		c.Lost(rep)
	}
	return nil
}

// level is Warn for a refusal whose line was printed, Debug for one
// summed up: a flood of refusals logs its first at Warn.
func level(log zerolog.Logger, printed bool) *zerolog.Event {
	if printed {
		return log.Warn()
	}
	return log.Debug()
}
