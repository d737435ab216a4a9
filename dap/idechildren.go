package dap

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"
)

// announce tells a child-session-capable IDE about a stopped executor by
// asking it to start a child session for it.
func (tx *held) announce(es *ExecutorSession) {
	h := tx.h
	x := tx.exec(es)
	root := tx.root
	// A detached executor's child session was closed since this root
	// attached: the developer let it go, so it is not opened again. Only
	// a stopped worker is announced (see unlist).
	if x.announced || x.detached || !x.ready || len(x.stopped) == 0 || root == nil || !tx.ide(root).childMode ||
		!tx.ide(root).configured || tx.children[es.id] != nil {
		return
	}
	x.announced = true
	x.announceGen++
	gen := x.announceGen
	cfg := tx.rootAttachArgs(notForChildKeys)
	// Named after the task it stopped in, first, then the worker: VS Code
	// cuts a long session name at the end, and with one thread it shows
	// no thread row, so the name is what tells stops apart; nvim-dap's
	// sessions widget shows the name alone. The session lasts while the
	// worker runs that task (unlist), so the name stays true.
	cfg["name"] = x.sessionName()
	cfg["connect"] = tx.childConnect()
	cfg["sparkdapExecutor"] = es.id
	// Only the root is given this value, and only here: a child attach must
	// bring it back, once, so another local client cannot take the
	// executor by naming its id.
	x.childKey = newChildKey()
	cfg[ChildKeyArg] = x.childKey
	req := newRequest("startDebugging", map[string]any{"request": "attach", "configuration": cfg})
	// The seq is recorded before the request can reach the IDE, so its
	// answer always finds the executor it is about.
	_ = root.w.send(req, func(seq int64) { tx.ide(root).asked[seq] = childAsk{es, gen} })
	// The IDE may refuse (answered in IDESession.handle) or never open the
	// child: either way nobody watches es, and it must not wait for anyone.
	x.childWait = time.AfterFunc(h.cfg.ChildAttachTimeout, func() {
		tx := h.lock()
		defer tx.unlock()
		tx.childMissing(es, gen, fmt.Sprintf("its child session did not attach within %s", h.cfg.ChildAttachTimeout))
	})
}

// proxyOnlyKeys are attach fields that configure the IDE↔proxy link, not
// pydevd.
var proxyOnlyKeys = []string{"connect", "listen", "host", "port", "processId", "request", "type", "name",
	"preLaunchTask", "postDebugTask", "restart", "sparkdapExecutor", IDETokenArg, ChildKeyArg, "subProcessId", "__sessionId",
	"__configurationTarget"}

// notForChildKeys are attach fields of the root's configuration that its
// child sessions' configurations leave out: what launches or restarts a
// session, and what names this one process or session. Those that say
// where and how to connect are kept (the child connects as the root did),
// and announce sets name, connect and the child's own keys.
var notForChildKeys = []string{"processId", "listen", "preLaunchTask", "postDebugTask", "request", "restart", "__sessionId"}

// rootAttachArgs is a copy of the root IDE's attach arguments without the
// fields named in drop: what a pydevd attach (proxyOnlyKeys) or a child
// session's configuration (notForChildKeys) takes from them.
func (tx *held) rootAttachArgs(drop []string) map[string]any {
	out := make(map[string]any, len(tx.attachArgs))
	for k, v := range tx.attachArgs {
		if !slices.Contains(drop, k) {
			out[k] = deepCopy(v)
		}
	}
	return out
}

// childConnect is where a child session must connect: where the
// root did, as its attach configuration says (connect.host/port, or the
// older top-level host/port), since the IDE may reach the proxy through a
// forwarded port (ssh -L, a container's port mapping) that the proxy's
// own listen address is not; the listen address only when the
// configuration names none.
func (tx *held) childConnect() map[string]any {
	if c, ok := tx.attachArgs["connect"].(map[string]any); ok {
		if addr := connectAddr(c["host"], c["port"]); addr != nil {
			return addr
		}
	}
	if addr := connectAddr(tx.attachArgs["host"], tx.attachArgs["port"]); addr != nil {
		return addr
	}
	host, port := "127.0.0.1", 0
	if ta, ok := tx.ideAddr.(*net.TCPAddr); ok {
		host, port = ta.IP.String(), ta.Port
		if ta.IP.IsUnspecified() {
			host = "127.0.0.1"
		}
	}
	return map[string]any{"host": host, "port": port}
}

// connectAddr is {host, port} from an attach configuration's values, or
// nil unless port is a valid port (a number or a numeric string, as
// launch.json variables give). A missing host is debugpy's default.
func connectAddr(hostV, portV any) map[string]any {
	port, ok := toInt(portV)
	if !ok {
		if s, isStr := portV.(string); isStr {
			n, err := strconv.ParseInt(s, 10, 32)
			port, ok = n, err == nil
		}
	}
	if !ok || port <= 0 || port > 65535 {
		return nil
	}
	host, _ := hostV.(string)
	if host == "" {
		host = "127.0.0.1"
	}
	return map[string]any{"host": host, "port": port}
}

// childAsk is a startDebugging request the root IDE has not answered yet.
type childAsk struct {
	es  *ExecutorSession
	gen uint64 // the executor's announceGen when it was sent
}

// childMissing lets es go when the child session announcement gen
// asked for will not come (the IDE refused it or never opened it): it is
// then watched by nobody, so its breakpoints are cleared and it is resumed.
// A newer announcement, or a child that did attach, makes it a no-op.
func (tx *held) childMissing(es *ExecutorSession, gen uint64, why string) {
	x := tx.exec(es)
	if x.announceGen != gen || !x.announced || !x.ready || tx.children[es.id] != nil {
		return
	}
	x.stopChildWait()
	x.detached = true
	es.logger().Warn().Str("reason", why).
		Msg("the IDE did not open this executor's child session; clearing its breakpoints and resuming it")
	tx.release(es)
}

// stopChildWait forgets the child session es's announcement awaits;
// its one-time value no longer opens one.
func (x *executorState) stopChildWait() {
	x.announceGen++
	x.childKey = ""
	if x.childWait != nil {
		x.childWait.Stop()
		x.childWait = nil
	}
}

// ChildKeyArg is the attach argument of a child session: the one-time value
// the proxy put in the startDebugging configuration that asked for it.
const ChildKeyArg = "sparkdapChildKey"

// newChildKey returns a fresh unguessable one-time value.
func newChildKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return hex.EncodeToString(b)
}

// unlist ends the child session of a worker that has moved on to another
// task while running: the IDE lists the workers that stopped, for as long
// as they run the task they stopped in, not every worker that was ever
// debugged (a job's hundreds). The worker stays debugged: the root's
// breakpoints go back to it in place of those its child session set for
// it alone, and its next stop announces it again, named after that task.
// The child is told terminated, as when an adapter's debuggee ends; the
// disconnect the client answers with is then that of a session no longer
// the executor's, which ends nothing else (Hub.ideGone).
func (tx *held) unlist(es *ExecutorSession) {
	x := tx.exec(es)
	child := tx.children[es.id]
	if child == nil || len(x.stopped) > 0 {
		return
	}
	delete(tx.children, es.id)
	x.announced = false
	x.stopChildWait()
	if len(x.overrides) > 0 {
		own := x.overrides
		x.overrides = nil
		for _, e := range own {
			// pydevd may still stop at e's breakpoints: its ids name
			// the root's at the same place from now on.
			tx.handBack(es, e)
			tx.bps.drop(e)
		}
		// The root's set of a file takes the place of the child's in one
		// request: pydevd's setBreakpoints replaces a file's set, and a
		// clear sent first would leave an instant in which the worker,
		// running its new task, passes the file's lines unwatched. Only
		// what the root has no set for, and paths only the child's set
		// went to, are cleared.
		replaced := map[string]*sentBreakpoints{}
		var roots []*bpEntry
		if !x.detached {
			for _, e := range tx.bps.global() {
				if own[e.key] != nil {
					roots = append(roots, e)
					replaced[e.key] = x.sent[e.key]
					delete(x.sent, e.key)
				}
			}
		}
		tx.clearSent(es, func(key string) bool { return own[key] == nil })
		for _, e := range roots {
			tx.sendBreakpoints(es, e, nil)
			if old := replaced[e.key]; old != nil {
				now := x.sent[e.key]
				tx.clearAt(es, old, func(path string) bool {
					if now == nil {
						return false
					}
					_, sent := now.sources[path]
					return sent
				})
			}
		}
	}
	tx.ide(child).ended = true
	_ = child.w.send(newEvent("terminated", nil), nil)
	child.leave()
	es.logger().Info().Str("label", x.label()).Msg("worker moved on to another task: its child session ended until it stops again")
}
