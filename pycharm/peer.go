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
// goroutine serving it (readPyCharm, serveConn).
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
