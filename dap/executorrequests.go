package dap

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// errTimeout is what a request gets when its executor does not answer.
var errTimeout = errors.New("no answer in time")

// pendingCall is a request sent to an executor and waiting for its response.
type pendingCall struct {
	cb    func(Message, error)
	timer *time.Timer
}

// request sends a request to pydevd; cb gets its response, or an error if
// the connection ends or the timeout passes first. cb runs on no lock.
func (es *ExecutorSession) request(command string, args any, timeout time.Duration, cb func(Message, error)) {
	pc := &pendingCall{cb: cb}
	var seq int64
	err := es.w.send(newRequest(command, args), func(s int64) {
		seq = s
		es.pendMu.Lock()
		if es.pending == nil {
			es.pending = map[int64]*pendingCall{}
		}
		es.pending[s] = pc
		// Its timer is in place before the request can reach pydevd:
		// the send may write it at once, and whoever takes pc (the
		// answer, the connection's end) stops the timer.
		pc.timer = time.AfterFunc(timeout, func() {
			if p := es.takePending(s); p != nil {
				p.cb(nil, fmt.Errorf("%s: %w (%s)", command, errTimeout, timeout))
			}
		})
		es.pendMu.Unlock()
	})
	if err != nil {
		// cb runs once: if pc was registered and something else took it
		// already (the connection's end fails every pending call), that
		// was its call.
		if seq == 0 || es.takePending(seq) != nil {
			// Not on this goroutine: callers may hold the Hub's lock,
			// and cb may take it.
			es.hub.goCallback(func() { cb(nil, err) })
		}
	}
}

func (es *ExecutorSession) takePending(seq int64) *pendingCall {
	es.pendMu.Lock()
	defer es.pendMu.Unlock()
	pc := es.pending[seq]
	delete(es.pending, seq)
	if len(es.pending) == 0 {
		// A map keeps its size once grown; the handshake's requests
		// would otherwise stay with every idle session.
		es.pending = nil
	}
	if pc != nil && pc.timer != nil {
		pc.timer.Stop()
	}
	return pc
}

// call is request made synchronous, for the handshake. A failed response is
// an error.
func (es *ExecutorSession) call(ctx context.Context, command string, args any) (Message, error) {
	type result struct {
		m   Message
		err error
	}
	ch := make(chan result, 1)
	es.request(command, args, es.hub.cfg.HandshakeTimeout, func(m Message, err error) { ch <- result{m, err} })
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		if !r.m.Success() {
			return r.m, fmt.Errorf("%s: %s", command, r.m.ErrorMessage())
		}
		return r.m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func ignoreAnswer(es *ExecutorSession) func(Message, error) {
	return func(m Message, err error) {
		if err == nil && !m.Success() {
			err = fmt.Errorf("%s", m.ErrorMessage())
		}
		if err != nil {
			es.logger().Debug().Err(err).Msg("cleanup request failed")
		}
	}
}

func (es *ExecutorSession) failPending(err error) {
	es.pendMu.Lock()
	calls := es.pending
	es.pending = nil
	es.pendMu.Unlock()
	for _, pc := range calls {
		if pc.timer != nil {
			pc.timer.Stop()
		}
		pc.cb(nil, err)
	}
}
