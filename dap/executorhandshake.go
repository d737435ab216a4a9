package dap

import (
	"context"
	"errors"
	"fmt"

	"github.com/sparkdap/sparkdap/admission"
)

// errRefused marks a handshake the proxy ended on purpose.
type errRefused struct{ reason string }

func (e *errRefused) Error() string { return "refused: " + e.reason }

// handshake does what debugpy's adapter does for a new pydevd connection,
// without waiting for any IDE, so the worker is never held up.
func (es *ExecutorSession) handshake(ctx context.Context) error {
	h := es.hub
	token, why, err := es.authorize(ctx)
	if err != nil {
		return fmt.Errorf("executor %s: authorize: %w", es.remote, err)
	}
	if why != "" {
		return es.refuse(ctx, why)
	}

	info, err := es.call(ctx, "pydevdSystemInfo", nil)
	if err != nil {
		return fmt.Errorf("executor %s: system info: %w", es.remote, err)
	}
	proc := parseSystemInfo(info.Body())

	if err := es.admit(proc, token); err != nil {
		return es.refuse(ctx, err.Error())
	}

	if _, err := es.call(ctx, "initialize", executorInitializeArgs()); err != nil {
		es.unadmit()
		return fmt.Errorf("executor %d: initialize: %w", es.id, err)
	}
	if _, err := es.call(ctx, "attach", es.attachArgs()); err != nil {
		es.unadmit()
		return fmt.Errorf("executor %d: attach: %w", es.id, err)
	}
	es.putInService()
	es.request("configurationDone", nil, h.cfg.HandshakeTimeout, func(m Message, err error) {
		if err == nil && !m.Success() {
			err = errors.New(m.ErrorMessage())
		}
		if err != nil {
			es.logger().Warn().Err(err).Msg("configurationDone failed")
		}
	})
	return nil
}

// authorize asks pydevd for the access token its worker was given. The
// verdict is taken on the reader goroutine, as the answer is read, so that
// the message after it is already judged by it: a token that could be
// valid (the real one, from a plain debugpy.connect, or the one-time token
// of a hello pending from this address) lets the handshake go on; admit
// then checks it exactly, against the hello of this process. It returns the
// token, and why the peer is refused, or "".
func (es *ExecutorSession) authorize(ctx context.Context) (token, why string, err error) {
	type verdict struct {
		token, why string
		err        error
	}
	ch := make(chan verdict, 1)
	es.request("pydevdAuthorize", map[string]any{"debugServerAccessToken": nil}, es.hub.cfg.HandshakeTimeout,
		func(m Message, err error) {
			switch {
			case err != nil:
				ch <- verdict{err: err}
				return
			case !m.Success():
				ch <- verdict{err: errors.New(truncate(m.ErrorMessage(), 200))}
				return
			}
			token, _ := m.Body()["clientAccessToken"].(string)
			if err := es.hub.admission.PlausibleToken(admission.RemoteIP(es.remote), token); err != nil {
				ch <- verdict{why: err.Error()}
				return
			}
			es.authorized.Store(true)
			if es.unadmitted != nil {
				es.unadmitted()
			}
			ch <- verdict{token: token}
		})
	select {
	case v := <-ch:
		return v.token, v.why, v.err
	case <-ctx.Done():
		return "", "", ctx.Err()
	}
}

// errUnauthorized ends a connection that sent more than answers to the
// handshake before presenting the access token.
var errUnauthorized = errors.New("message before presenting the access token")

// refuse ends a connection the proxy will not debug. pydevd holds the worker
// in debugpy.connect until configurationDone, and a bare close would leave it
// hanging forever; configurationDone then close lets it run on undebugged.
func (es *ExecutorSession) refuse(ctx context.Context, why string) error {
	level := es.logger().Debug()
	if es.hub.refusedLine(es.remote, fmt.Sprintf("executor from %s refused: %s; it runs undebugged", es.remote, why)) {
		level = es.logger().Warn()
	}
	level.Str("reason", why).Msg("executor refused; its worker continues undebugged")
	_, _ = es.call(ctx, "configurationDone", nil)
	return &errRefused{why}
}

func parseSystemInfo(b map[string]any) ProcessInfo {
	var p ProcessInfo
	if proc, ok := b["process"].(map[string]any); ok {
		p.PID, _ = toInt(proc["pid"])
		p.PPID, _ = toInt(proc["ppid"])
		p.Executable, _ = proc["executable"].(string)
	}
	if py, ok := b["python"].(map[string]any); ok {
		if v, ok := py["version"].(string); ok {
			p.Python = v
		}
	}
	if pl, ok := b["platform"].(map[string]any); ok {
		p.Platform, _ = pl["name"].(string)
	}
	// Shown to people (logs, status): cleaned where it enters the proxy.
	p.Executable = admission.Clean(p.Executable, admission.MaxPathRunes)
	p.Python = admission.Clean(p.Python, admission.MaxTextRunes)
	p.Platform = admission.Clean(p.Platform, admission.MaxTextRunes)
	return p
}

func executorInitializeArgs() map[string]any {
	return map[string]any{
		"clientID": "sparkdap", "clientName": "sparkdap", "adapterID": "debugpy",
		"pathFormat": "path", "linesStartAt1": true, "columnsStartAt1": true,
		"supportsVariableType": true, "supportsVariablePaging": true,
		"supportsRunInTerminalRequest": false, "supportsStartDebuggingRequest": false,
	}
}

// attachArgs passes the IDE's debugger settings (justMyCode, rules,
// showReturnValue, …) on to pydevd, with defaults for when no IDE is there.
func (es *ExecutorSession) attachArgs() map[string]any {
	h := es.hub
	tx := h.lock()
	defer tx.unlock()
	args := map[string]any{"justMyCode": true, "redirectOutput": true}
	for k, v := range tx.rootAttachArgs(proxyOnlyKeys) {
		args[k] = v
	}
	if _, ok := args["pathMappings"]; !ok && h.cfg.Paths != nil {
		// With any mapping in place pydevd gives every path it cannot map
		// a sourceReference, so code with no local copy can still be shown.
		// This one never matches: the proxy does the real mapping.
		args["pathMappings"] = []any{map[string]any{
			"localRoot": "/nonexistent/sparkdap-local", "remoteRoot": "/nonexistent/sparkdap-remote"}}
	}
	if tx.exec(es).task.PostMortem {
		// PySpark's worker catches every exception of a task, so to pydevd
		// none is ever uncaught. Counting PySpark as library code makes an
		// exception leaving the user's function "user-unhandled".
		rules, _ := args["rules"].([]any)
		for _, m := range []string{"pyspark", "py4j"} {
			rules = append(rules, map[string]any{"module": m, "include": false})
		}
		// The worker wrapper too: it runs as __main__, and a failed task's
		// worker leaves through it with SystemExit, which would otherwise
		// stop there as one more user-unhandled exception.
		rules = append(rules, map[string]any{"path": "**/remote_debug.py", "include": false})
		args["rules"] = rules
	}
	return args
}
