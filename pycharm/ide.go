package pycharm

import (
	"bufio"
	"errors"
	"fmt"
	"net"
)

// This file holds the one connection to PyCharm's debug server and the
// session state PyCharm set on it, replayed to executors that join.

// session is what PyCharm told the proxy since it connected: replayed to
// every executor that joins.
type session struct {
	version    *Message
	versionAns *answer
	settings   []setting
	run        bool
	seq        int // last seq the proxy gave a message of its own to PyCharm
}

type setting struct {
	key string
	m   Message
}

// tellPyCharm shows line in PyCharm's console, as pydevd's stderr output
// would appear there: for what the user should know about workers that
// never became a session (one that cannot load a debugger), or output a
// worker could not deliver (a loss report). It connects
// to PyCharm's debug server for it, as a worker's hello would: a job whose
// every worker lacks a debugger should not leave PyCharm waiting in
// silence. serve's log has the line from the RefusalLog either way.
func (p *Proxy) tellPyCharm(line string) {
	if err := p.ensurePyCharm(); err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ide != nil {
		p.ide.send(writeToConsole(p.nextIDESeq(), "sparkdap: "+line+"\n", "2"))
	}
}

// ensurePyCharm connects to PyCharm's debug server unless connected.
func (p *Proxy) ensurePyCharm() error {
	p.dialMu.Lock()
	defer p.dialMu.Unlock()
	p.mu.Lock()
	connected, closed := p.ide != nil, p.closed
	p.mu.Unlock()
	if closed {
		return errors.New("proxy shutting down")
	}
	if connected {
		return nil
	}
	conn, err := net.DialTimeout("tcp", p.cfg.PyCharm, p.cfg.DialTimeout)
	if err != nil {
		p.log.Warn().Err(err).Str("pycharm", p.cfg.PyCharm).Msg("cannot reach PyCharm's debug server")
		return fmt.Errorf("PyCharm's Python Debug Server is not listening at %s", p.cfg.PyCharm)
	}
	ide := newPeer(conn)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		ide.close()
		return errors.New("proxy shutting down")
	}
	p.ide, p.st = ide, &session{}
	p.mu.Unlock()
	p.log.Info().Str("pycharm", p.cfg.PyCharm).Msg("connected to PyCharm's debug server")
	p.summary("connected to PyCharm at %s", p.cfg.PyCharm)
	go p.readPyCharm(ide, conn)
	return nil
}

func (p *Proxy) readPyCharm(ide *peer, conn net.Conn) {
	br := bufio.NewReaderSize(conn, 64<<10)
	for {
		m, err := ReadMessage(br, MaxLineBytes)
		if err != nil {
			p.log.Debug().Err(err).Msg("PyCharm connection ended")
			break
		}
		p.fromPyCharm(ide, m)
	}
	ide.close()
	p.mu.Lock()
	if p.ide != ide {
		p.mu.Unlock()
		return
	}
	p.ide, p.st = nil, nil
	var gone []*executor
	for pid, e := range p.execs {
		gone = append(gone, e)
		delete(p.execs, pid)
	}
	closed := p.closed
	p.mu.Unlock()
	for _, e := range gone {
		e.p.close()
	}
	if !closed {
		p.log.Info().Int("executors", len(gone)).Msg("PyCharm closed the debug connection; executors run on undebugged")
		p.summary("PyCharm closed the debug connection; %d worker(s) let go", len(gone))
	}
}

// nextIDESeq numbers the proxy's own messages to PyCharm (pydevd's style:
// even). Callers hold p.mu and p.st is set.
func (p *Proxy) nextIDESeq() int {
	p.st.seq += 2
	return p.st.seq
}

// record keeps (or with keep false, drops) a setting for replay.
func (st *session) record(key string, m Message, keep bool) {
	for i, s := range st.settings {
		if s.key == key {
			st.settings = append(st.settings[:i], st.settings[i+1:]...)
			break
		}
	}
	if keep {
		st.settings = append(st.settings, setting{key: key, m: m})
	}
}
