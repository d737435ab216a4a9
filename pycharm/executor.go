package pycharm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/connbudget"
)

// This file attaches and detaches executors: a connection is told from a
// hello, its pydevd is identified by the probe's answer, joined to its
// hello and served until it leaves.

// The proxy speaks first on every executor connection, because pydevd never
// does: it asks for the thread list, whose ids carry the worker's pid. A
// hello connection skips it; a pydevd connection answers it.
const probeSeq = 1

// identifyTimeout bounds a new connection's first bytes and pydevd's answer
// to the probe (a var for tests).
var identifyTimeout = 15 * time.Second

// Until a pydevd connection is tied to its hello (its answer to the probe
// names the connect guard), it has proved nothing, so what it may make the
// proxy read and hold is small: a small read buffer, and a budget for
// everything it sends up to that answer, the answer included (pydevd's
// thread list, a few hundred bytes a thread, and the thread and process
// events it may send first). Lines grow as their bytes arrive. Once
// joined, lines up to MaxLineBytes are read through a larger buffer.
const (
	unidentifiedReadBuffer = 4 << 10
	maxUnidentifiedBytes   = 64 << 10
	joinedReadBuffer       = 64 << 10
)

// guardThreadPrefix starts the name of the wrapper's connect-guard thread
// in PyCharm mode: "sparkdap-connect-guard <nonce>", the nonce being the
// one the proxy handed out in its hello reply ("SPARKDAP/2 OK <nonce>").
// The thread lives exactly while pydevd_pycharm.settrace connects, so the
// answer to the proxy's probe (CMD_LIST_THREADS) names it: that binds the
// pydevd connection to its hello by a secret only the hello's connection
// saw, where pid and address alone (the address is shared by every
// process on the worker's host) can be guessed by a co-tenant.
const guardThreadPrefix = "sparkdap-connect-guard "

type executor struct {
	pid     int64
	ip      string
	hello   admission.Hello
	label   string
	p       *peer
	paths   *pathRewriter
	seq     int // last seq the proxy used towards this executor (odd)
	pending map[int]request
	bps     map[string][]string      // breakpoint key → executor files it was set on
	threads map[string]string        // thread id → pydevd's name, for those PyCharm knows
	hidden  map[string]bool          // the wrapper's own threads, kept from PyCharm
	stopped map[string]StoppedThread // thread id → its stop as PyCharm saw it
	// Stops at exceptions (exceptions.go): the type pydevd announced per
	// thread before suspending it, the stops held from PyCharm, and the
	// threads the proxy resumed unseen, whose resume PyCharm must not get.
	raised  map[string]string
	heldExc map[string]*heldException
	unseen  map[string]bool

	// Its MaxStop clock (maxstop.go).
	stopSince time.Time   // when it last stopped
	lastAsked time.Time   // when PyCharm last asked something about it
	maxStop   *time.Timer // checks the clock; nil when not running
	// leaseTimer renews its stops' lease while it has a stopped thread;
	// leasePing is the sequence number of its last ping (lease.go).
	leaseTimer *time.Timer
	leasePing  int
}

func (p *Proxy) forget(conn net.Conn) {
	p.mu.Lock()
	delete(p.conns, conn)
	p.mu.Unlock()
	conn.Close()
}

// serveConn tells a hello from a pydevd connection and serves it. It holds
// place in the budget until the connection joins or ends; place.Release gives
// it back.
func (p *Proxy) serveConn(conn net.Conn, place *connbudget.Place) {
	defer p.forget(conn)
	defer place.Release()
	log := p.log.With().Str("remote", conn.RemoteAddr().String()).Logger()
	// A peer without the token can make these by the thousand: the first
	// of each cause per interval is a warning.
	warn := func(cause string) *zerolog.Event {
		if p.logLimit.Allow(cause) {
			return log.Warn()
		}
		return log.Debug()
	}
	_ = conn.SetDeadline(time.Now().Add(identifyTimeout))
	if _, err := conn.Write(Message{ID: CmdListThreads, Seq: probeSeq}.Marshal()); err != nil {
		return
	}
	// Owned by this goroutine: lr.N is the budget left to a connection
	// not yet identified.
	lr := &io.LimitedReader{R: conn, N: maxUnidentifiedBytes}
	br := bufio.NewReaderSize(lr, unidentifiedReadBuffer)
	if _, err := br.Peek(1); err != nil {
		log.Debug().Err(err).Msg("connection closed before it said anything")
		return
	}
	if admission.IsHello(br) {
		// The hello bounds its own lines (admission.Registry.Handshake); the
		// connection closes after it.
		lr.N = math.MaxInt64
		p.serveHello(conn, br, log, place)
		return
	}
	// pydevd: read up to the probe's answer; keep anything before it.
	var early []Message
	var pid int64
	var nonce string
	for pid == 0 {
		m, err := ReadMessage(br, maxUnidentifiedBytes)
		if err == nil {
			place.Progressed()
		}
		if err != nil {
			if lr.N <= 0 {
				err = fmt.Errorf("more than %d bytes before its answer to the proxy's probe", maxUnidentifiedBytes)
			}
			warn("pydevd connection ended unidentified").Err(err).Msg("pydevd connection ended before it said which process it is")
			return
		}
		if m.Seq == probeSeq && (m.ID == CmdReturn || m.ID == CmdError) {
			for _, t := range ThreadList(m.Payload) {
				if n, ok := strings.CutPrefix(t.Name, guardThreadPrefix); ok {
					pid, _ = ThreadPID(t.ID)
					nonce = n
					break
				}
			}
			if pid == 0 {
				warn("pydevd connection without connect guard").Msg("pydevd connection refused: its thread list names no sparkdap connect guard " +
					"(not a sparkdap wrapper of this version); the worker runs undebugged")
				return
			}
			continue
		}
		early = append(early, m)
	}
	_ = conn.SetDeadline(time.Time{})
	e, err := p.join(conn, pid, nonce)
	if err != nil {
		warn("pydevd connection without hello").Err(err).Int64("pid", pid).Msg("pydevd connection refused; the worker runs undebugged")
		return
	}
	place.Release()
	lr.N = math.MaxInt64
	// Large reads bypass the small buffer (bufio reads straight into a
	// caller's buffer at least as large as its own).
	br = bufio.NewReaderSize(br, joinedReadBuffer)
	log = log.With().Int64("pid", pid).Str("label", e.label).Logger()
	log.Info().Msg("executor joined the PyCharm session")
	p.summary("worker %s pid %d attached (%s)", e.hello.Host, pid, e.hello.Label)
	for _, m := range early {
		p.fromExecutor(e, m)
	}
	for {
		m, err := ReadMessage(br, MaxLineBytes)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				log.Debug().Err(err).Msg("executor connection ended")
			}
			break
		}
		// Console output just relayed to a PyCharm far behind: stop
		// reading this executor until PyCharm catches up (peer.pace),
		// here on its reader, p.mu released.
		if ide := p.fromExecutor(e, m); ide != nil {
			if d := ide.pace(e.p.q.Done()); d > time.Second {
				log.Debug().Dur("waited", d).Int("queued", ide.q.Queued()).
					Msg("paused reading the executor's output: PyCharm reads slowly")
			}
		}
	}
	p.leave(e)
	log.Info().Msg("executor left the PyCharm session")
	p.summary("worker %s pid %d detached", e.hello.Host, pid)
}

// join registers an identified pydevd connection and replays PyCharm's
// session to it.
func (p *Proxy) join(conn net.Conn, pid int64, nonce string) (*executor, error) {
	ip := admission.RemoteIP(conn.RemoteAddr().String())
	p.mu.Lock()
	defer p.mu.Unlock()
	// One use only: Claim forgets it.
	hello, ok := p.admission.Claim(nonce, ip, pid)
	if !ok {
		return nil, errors.New("no hello for this connection (its nonce is unknown or expired, or names another process)")
	}
	if p.st == nil {
		return nil, errors.New("PyCharm is not connected")
	}
	if _, dup := p.execs[pid]; dup {
		return nil, fmt.Errorf("pid %d is already connected", pid)
	}
	e := &executor{pid: pid, ip: ip, hello: hello, p: newPeer(conn), seq: probeSeq,
		paths: newPathRewriter(p.cfg.Paths, hello.Roots), pending: map[int]request{},
		bps: map[string][]string{}, threads: map[string]string{}, hidden: map[string]bool{},
		stopped: map[string]StoppedThread{}}
	e.label = labelOf(hello.TaskInfo)
	p.execs[pid] = e
	st := p.st
	if st.version != nil {
		p.forward(e, *st.version, request{ans: st.versionAns, swallow: st.versionAns.done})
	}
	for _, s := range st.settings {
		p.toExecutor(e, s.m, request{swallow: true})
	}
	if st.run {
		p.forward(e, Message{ID: CmdRun}, request{swallow: true})
	}
	return e, nil
}

// leave forgets an executor whose connection ended: PyCharm is told its
// threads are gone and gets errors for what it still waits for.
func (p *Proxy) leave(e *executor) {
	e.p.close()
	p.mu.Lock()
	defer p.mu.Unlock()
	// Also when PyCharm's teardown already forgot e: the proxy's own
	// evals waiting on e fail now (ErrWorkerGone), not at their timeout.
	pending := e.pending
	for _, r := range pending {
		if r.reply != nil {
			close(r.reply)
		}
	}
	e.pending = map[int]request{}
	e.stopMaxStop()
	if p.execs[e.pid] != e {
		return
	}
	delete(p.execs, e.pid)
	if p.ide == nil {
		return
	}
	var seqs []int
	for _, r := range pending {
		if !r.swallow && r.ans == nil {
			seqs = append(seqs, r.ideSeq)
		}
	}
	sort.Ints(seqs)
	for _, s := range seqs {
		p.ide.send(ErrorMessage(s, fmt.Sprintf("sparkdap: the worker (pid %d) went away", e.pid)))
	}
	threads := make([]string, 0, len(e.threads))
	for t := range e.threads {
		threads = append(threads, t)
	}
	sort.Strings(threads)
	for _, t := range threads {
		p.ide.send(Message{ID: CmdThreadKill, Seq: p.nextIDESeq(), Payload: PyQuote(t, payloadSafe)})
	}
}
