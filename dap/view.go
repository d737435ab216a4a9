package dap

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"

	"github.com/sparkdap/sparkdap/control"
)

// The root session's own requests for a view of the job's workers (the
// VS Code extension's): the control protocol over the DAP connection the
// IDE already has, so it works wherever the IDE reaches the proxy (a
// forwarded port) and with an IDE token, which the root's attach checked.
// Child sessions show one worker each and refuse them.

const (
	// ControlCommand is a control request (control.Request, as its
	// arguments) answered with its control.Answer as the body, or an
	// error response with the answer's error and code.
	ControlCommand = "sparkdap"
	// WatchCommand subscribes the root session to WorkersEvent
	// ({"maxRows": 1 to control.MaxKnownRows, default 500}) or ends that
	// ({"off": true}).
	WatchCommand = "sparkdapWatch"
)

// maxControlInFlight bounds the ControlCommand requests answered at once:
// each waits on a goroutine of its own for executors (a capture, a pause,
// the stacks of stopped workers).
const maxControlInFlight = 8

// viewRequest serves ControlCommand and WatchCommand for an attached
// session.
func (s *IDESession) viewRequest(m Message) {
	if !s.isRoot() {
		s.fail(m, "%s: an executor's child session does not serve it; send it on the root session (the one attached to the proxy)", m.Command())
		return
	}
	if m.Command() == WatchCommand {
		s.watchRequest(m)
		return
	}
	h := s.hub
	// The socket's own parser, strict and bounded: what the control
	// socket refuses, this refuses too.
	raw, err := json.Marshal(m.Arguments())
	var req control.Request
	if err == nil {
		req, err = control.ReadRequest(bytes.NewReader(raw))
	}
	if err != nil {
		s.controlFailed(m, control.Answer{Error: err.Error(), Code: control.CodeBadRequest})
		return
	}
	select {
	case h.controlSlots <- struct{}{}:
	default:
		s.controlFailed(m, control.Answer{Error: strconv.Itoa(maxControlInFlight) + " sparkdap requests are being answered already; try again once one is",
			Code: control.CodeFailed})
		return
	}
	// Answered on a goroutine of its own: the reader never waits for an
	// executor (Hub). Its waits are bounded by Config.RequestTimeout.
	h.goCallback(func() {
		defer func() { <-h.controlSlots }()
		ans, _ := control.Ask(context.Background(), h, req)
		if ans.Error != "" {
			s.controlFailed(m, ans)
			return
		}
		body, err := json.Marshal(ans)
		if err != nil {
			s.controlFailed(m, control.Answer{Error: "encoding the answer: " + err.Error(), Code: control.CodeFailed})
			return
		}
		s.replyEncoded(m, body)
	})
}

// controlFailed answers req with ans's error: the message the IDE may
// show, and its code in the body for the client to tell errors apart.
func (s *IDESession) controlFailed(req Message, ans control.Answer) {
	s.logger().Debug().Str("command", req.Command()).Str("code", ans.Code).Msgf("error response: %s", ans.Error)
	r := newErrorResponse(req, "%s", ans.Error)
	r["body"] = map[string]any{"error": map[string]any{"id": 1, "format": ans.Error, "showUser": false}, "code": ans.Code}
	s.reply(r)
}

// watchRequest subscribes the root session to WorkersEvent, or ends its
// subscription. Both happen under the Hub's lock, with the answer: a
// root that leaves meanwhile (rootGone ends its subscription) cannot be
// left subscribed, and after the answer to off no event follows.
func (s *IDESession) watchRequest(m Message) {
	h := s.hub
	rows := defaultWatchRows
	off := false
	for k, v := range m.Arguments() {
		switch k {
		case "maxRows":
			n, ok := toInt(v)
			if !ok || n < 1 || n > control.MaxKnownRows {
				s.fail(m, "%s: maxRows %v: want 1 to %d", WatchCommand, v, control.MaxKnownRows)
				return
			}
			rows = int(n)
		case "off":
			b, ok := v.(bool)
			if !ok {
				s.fail(m, "%s: off %v: want true or false", WatchCommand, v)
				return
			}
			off = b
		default:
			s.fail(m, "%s: unknown argument %q: it takes maxRows and off", WatchCommand, truncate(k, 64))
			return
		}
	}
	tx := h.lock()
	defer tx.unlock()
	if tx.root != s {
		s.fail(m, "%s: this session is not the root session any more", WatchCommand)
		return
	}
	if off {
		h.watch.end(s)
		s.reply(newResponse(m, map[string]any{"version": 1}))
		return
	}
	s.reply(newResponse(m, map[string]any{"version": 1}))
	h.watch.subscribe(s, rows)
}
