package pycharm

import (
	"net"
	"sync"
	"time"
)

// peer is one TCP connection with its own writer goroutine, so that a slow
// peer never blocks the multiplexer: sends queue without blocking, and a peer
// that lets its queue overflow is disconnected.
type peer struct {
	conn net.Conn
	out  chan []byte
	done chan struct{}
	once sync.Once
}

const (
	peerQueue    = 4096
	writeTimeout = 30 * time.Second
)

func newPeer(conn net.Conn) *peer {
	p := &peer{conn: conn, out: make(chan []byte, peerQueue), done: make(chan struct{})}
	go p.writeLoop()
	return p
}

func (p *peer) writeLoop() {
	for {
		select {
		case b := <-p.out:
			_ = p.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
			if _, err := p.conn.Write(b); err != nil {
				p.close()
				return
			}
		case <-p.done:
			return
		}
	}
}

// send queues one message; false if the peer is gone or could not keep up.
func (p *peer) send(m Message) bool {
	select {
	case <-p.done:
		return false
	default:
	}
	select {
	case p.out <- m.Marshal():
		return true
	default:
		p.close()
		return false
	}
}

func (p *peer) close() {
	p.once.Do(func() {
		close(p.done)
		p.conn.Close()
	})
}
