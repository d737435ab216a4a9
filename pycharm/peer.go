package pycharm

import (
	"net"
	"time"

	"github.com/sparkdap/sparkdap/internal/wirequeue"
)

// peer is one TCP connection (PyCharm's or an executor's pydevd) whose
// writes go through a wirequeue.Queue, so that a slow peer never blocks the
// multiplexer: sends never block (callers hold p.mu): the queue has one
// writer at a time, a sender's one non-blocking write when nobody is
// writing, else its flusher goroutine, running only while there is
// something left to write; and a peer that lets too much pile up, or reads
// nothing for writeTimeout, is disconnected. The connection's reader is the
// goroutine serving it (readPyCharm, serveConn). One reader waits for
// another connection: an executor's, after relaying console output, while
// PyCharm is far behind (pace), on no lock.
type peer struct {
	q *wirequeue.Queue
}

const writeTimeout = 30 * time.Second

func newPeer(conn net.Conn) *peer {
	return &peer{q: wirequeue.New(conn, wirequeue.Options{WriteTimeout: writeTimeout})}
}

// send queues one message; false if the peer is gone or could not keep up.
func (p *peer) send(m Message) bool { return p.q.Send(m.Marshal()) == nil }

func (p *peer) close() { p.q.Close(nil) }

// Output pacing: a worker that prints a lot sends CMD_WRITE_TO_CONSOLE as
// fast as pydevd-pycharm writes it, and PyCharm's queue never blocks, so
// without a brake the proxy would hold whatever PyCharm has not read yet
// and cut PyCharm off at the queue's byte cap (wirequeue.DefaultMaxQueued),
// or after writeTimeout of reading nothing: the user would lose the whole
// session, every worker's, and the output. So the executor's reader stops
// reading while PyCharm is far behind. That is TCP backpressure to
// pydevd-pycharm, whose writer thread blocks, and so to the wrapper's
// output batcher, which makes print() wait, bounded, and fails open; the
// executor's other messages wait with its output, in order. The same
// marks as the DAP front end's.
const (
	// paceHigh: more than this queued for PyCharm and the executor's
	// reader waits ...
	paceHigh = 8 << 20
	// paceLow: ... until no more than this is.
	paceLow = 4 << 20
	// paceStall: a PyCharm that has read nothing for this long is not
	// waited for (wirequeue.Queue.WaitBelow): the byte cap or writeTimeout
	// cuts it off as before, and no executor is held by it.
	paceStall = 10 * time.Second
)

// pace waits, if p (PyCharm's peer, which console output was just
// relayed to) is far behind, until it has read enough (see paceHigh), and
// returns how long it waited. Called by an executor's reader (serveConn)
// only, never under the Proxy's mu: under no lock, ended by abort (the
// executor's own connection closing) or by p closing, and bounded by
// paceStall.
// PyCharm's reader never waits for an executor's, so the two cannot wait
// for each other.
func (p *peer) pace(abort <-chan struct{}) time.Duration {
	if p.q.Queued() <= paceHigh {
		return 0
	}
	start := time.Now()
	p.q.WaitBelow(paceLow, paceStall, abort)
	return time.Since(start)
}
