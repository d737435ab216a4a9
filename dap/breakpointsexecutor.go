package dap

import (
	"path"
	"sort"
	"strings"

	"github.com/sparkdap/sparkdap/pathmap"
)

// What each executor was sent, so that letting it go (held.release) clears
// every breakpoint ever sent to it where it was sent: the executor's
// paths, not the IDE's.

// sentBreakpoints is what one breakpoint key has been sent to an executor
// as. Guarded by the Hub's lock.
type sentBreakpoints struct {
	command string
	// sources maps each executor path a source breakpoint request went to
	// (with a PathMapper, every candidate path of the local file) to the
	// source object sent; "" holds the one request of a key without a path
	// (function and exception breakpoints, sourceReference sources).
	sources map[string]map[string]any
}

// recordSent remembers that args went to es under key.
func (x *executorState) recordSent(key, command string, args map[string]any) {
	if x.sent == nil {
		x.sent = map[string]*sentBreakpoints{}
	}
	sb := x.sent[key]
	if sb == nil {
		sb = &sentBreakpoints{command: command, sources: map[string]map[string]any{}}
		x.sent[key] = sb
	}
	src, _ := args["source"].(map[string]any)
	p, _ := src["path"].(string)
	var keep map[string]any
	if src != nil {
		keep = deepCopy(src).(map[string]any)
	}
	sb.sources[p] = keep
}

// clearSent removes from es every breakpoint sent under a key that
// keep does not claim (nil keeps none), at every path it went to, and
// forgets those keys.
func (tx *held) clearSent(es *ExecutorSession, keep func(key string) bool) {
	x := tx.exec(es)
	keys := make([]string, 0, len(x.sent))
	for k := range x.sent {
		if keep == nil || !keep(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		sb := x.sent[k]
		delete(x.sent, k)
		delete(x.refusals, k)
		tx.clearAt(es, sb, nil)
	}
}

// clearAt sends es the empty set of sb's kind at every path sb went to
// that keep does not claim (nil keeps none).
func (tx *held) clearAt(es *ExecutorSession, sb *sentBreakpoints, keep func(path string) bool) {
	paths := make([]string, 0, len(sb.sources))
	for p := range sb.sources {
		if keep == nil || !keep(p) {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		args := map[string]any{}
		switch sb.command {
		case "setBreakpoints":
			if sb.sources[p] == nil {
				continue
			}
			args["source"] = deepCopy(sb.sources[p])
			args["breakpoints"] = []any{}
		case "setFunctionBreakpoints":
			args["breakpoints"] = []any{}
		case "setExceptionBreakpoints":
			args["filters"] = []any{}
		default:
			continue
		}
		es.request(sb.command, args, tx.h.cfg.FanoutTimeout, ignoreAnswer(es))
	}
}

// Refusals: per executor, what pydevd answered to the source
// breakpoints sent to it, so that a breakpoint no candidate path could bind
// is reported: in the IDE with pydevd's reason and what to do, and in
// `sparkdap paths`.

// bpAnswers is one executor's answers to the latest request of one
// breakpoint key. Guarded by the Hub's lock.
type bpAnswers struct {
	entry   *bpEntry
	pending int      // requests not answered yet
	tried   []string // executor paths the request went to
	pos     []bpPosAnswer
}

// bpPosAnswer is the best answer for one breakpoint position over every
// candidate path: bound anywhere, else the most telling reason.
type bpPosAnswer struct {
	line     int64
	verified bool
	message  string
}

// expectAnswers starts a new record for e on es: n requests are on
// their way.
func (x *executorState) expectAnswers(e *bpEntry, n int) {
	if e.command != "setBreakpoints" {
		return
	}
	if x.refusals == nil {
		x.refusals = map[string]*bpAnswers{}
	}
	x.refusals[e.key] = &bpAnswers{entry: e, pending: n}
}

// answered folds one answer (bps nil: failed or timed out) into es's
// record for e, if it is still the latest, and reports whether it was the
// last answer awaited.
func (x *executorState) answered(e *bpEntry, sentTo string, bps []any) bool {
	a := x.refusals[e.key]
	if a == nil || a.entry != e {
		return false
	}
	a.pending--
	if sentTo != "" {
		a.tried = append(a.tried, sentTo)
	}
	for len(a.pos) < len(bps) {
		a.pos = append(a.pos, bpPosAnswer{})
	}
	for i, item := range bps {
		bp, _ := item.(map[string]any)
		if bp == nil {
			continue
		}
		p := &a.pos[i]
		if line, ok := toInt(bp["line"]); ok && p.line == 0 {
			p.line = line
		}
		if v, _ := bp["verified"].(bool); v {
			p.verified = true
			continue
		}
		if msg, _ := bp["message"].(string); refusalRank(msg) > refusalRank(p.message) {
			p.message = msg
		}
	}
	return a.pending == 0
}

// notLoaded starts the reason given for a breakpoint pydevd set at a path
// the executor loads no code from.
const notLoaded = "Breakpoint in a file this executor loads no code from:"

// boundOnlyWhereLoaded returns pydevd's answer for breakpoints sent to
// executor path p, with every "verified" taken back when p is under none of
// the directories the executor loads code from. pydevd verifies a line in
// any file that exists: the developer's own checkout on a shared machine, a
// driver script whose functions run from another path. Such a breakpoint
// is set but would never stop, so the IDE must not show it bound. An
// executor that named no roots (not started by sparkdap's wrapper) leaves
// pydevd's word as it is.
func boundOnlyWhereLoaded(r pathmap.Roots, p string, bps []any) []any {
	if p == "" || loadsFrom(r, p) {
		return bps
	}
	out := make([]any, len(bps))
	for i, item := range bps {
		out[i] = item
		bp, ok := item.(map[string]any)
		if !ok || bp["verified"] != true {
			continue
		}
		bp = deepCopy(bp).(map[string]any)
		bp["verified"] = false
		bp["message"] = notLoaded + " " + truncate(p, 512) + "."
		out[i] = bp
	}
	return out
}

// loadsFrom reports whether executor path p is under one of roots' code
// directories (library ones included: code there is importable), or
// whether roots are unknown.
func loadsFrom(r pathmap.Roots, p string) bool {
	dirs := append(append([]string{r.DriverDir, r.SparkFiles, r.Cwd}, r.CodeDirs...), r.SysPath...)
	known := false
	p = path.Clean(p)
	for _, d := range dirs {
		if d == "" {
			continue
		}
		known = true
		if !path.IsAbs(d) && r.Cwd != "" {
			d = path.Join(r.Cwd, d)
		}
		d = path.Clean(d)
		if d == "/" || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return !known
}

// verified records a breakpoint pydevd bound later (a breakpoint
// event).
func (x *executorState) verified(e *bpEntry, i int) {
	if a := x.refusals[e.key]; a != nil && a.entry == e && i < len(a.pos) {
		a.pos[i].verified = true
	}
}

// refusalRank orders pydevd's reasons by how much they tell: "does not
// exist" is what every wrong candidate path answers, so any other reason
// from the path that does exist wins over it.
func refusalRank(msg string) int {
	switch {
	case msg == "":
		return 0
	case strings.Contains(msg, "does not exist"):
		return 1
	case strings.HasPrefix(msg, notLoaded):
		return 2
	}
	return 3
}

// driverAdvice is what to do about a breakpoint in the driver's script:
// its functions reach executors pickled, under the driver's path.
const driverAdvice = "If it is the driver's script, its breakpoints bind when a task runs a function defined in it; " +
	"to bind them before, start the job with `sparkdap submit`, or pass the SPARKDAP_DRIVER_DIR setting `sparkdap conf` prints."

// explainRefusal adds to pydevd's reason what the developer can do about it.
func explainRefusal(msg string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(msg), "\n")
	switch {
	case strings.Contains(msg, "does not exist"):
		return first + " The executor has this file at none of the paths sparkdap tried. " + driverAdvice +
			" Otherwise run `sparkdap paths` to see where the executors load code from, and fix `sparkdap serve --root DIR` or add --map REMOTE=LOCAL."
	case strings.HasPrefix(msg, notLoaded):
		return first + " pydevd can set it there, but the executor runs no code from that path. " + driverAdvice +
			" Otherwise ship the file (--py-files) or fix the mapping: `sparkdap paths` shows where the executors load code from; see `sparkdap serve --root DIR` and --map REMOTE=LOCAL."
	case strings.Contains(msg, "excluded by filters"):
		return first + " The executor counts this file as library code: set \"justMyCode\": false in your attach configuration."
	case strings.Contains(msg, "invalid line"):
		return first + " Put the breakpoint on a line with code."
	}
	return first
}

// BreakpointRefusal is a source breakpoint an executor could not set at any
// path, for `sparkdap paths`.
type BreakpointRefusal struct {
	Source  string   `json:"source"` // the IDE's (local) path
	Line    int64    `json:"line"`
	Message string   `json:"message"` // pydevd's reason, and what to do
	Tried   []string `json:"tried"`   // the executor paths it was sent to
}

// refusals lists es's refused source breakpoints, once every answer
// is in.
func (x *executorState) refused() []BreakpointRefusal {
	out := []BreakpointRefusal{}
	for _, a := range x.refusals {
		if a.pending > 0 {
			continue
		}
		src, _ := a.entry.args["source"].(map[string]any)
		local, _ := src["path"].(string)
		asked, _ := a.entry.args["breakpoints"].([]any)
		for i, p := range a.pos {
			if p.verified || p.message == "" {
				continue
			}
			if p.line == 0 && i < len(asked) {
				if b, ok := asked[i].(map[string]any); ok {
					p.line, _ = toInt(b["line"])
				}
			}
			tried := append([]string(nil), a.tried...)
			sort.Strings(tried)
			out = append(out, BreakpointRefusal{Source: local, Line: p.line, Message: explainRefusal(p.message), Tried: tried})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Source != out[j].Source {
			return out[i].Source < out[j].Source
		}
		return out[i].Line < out[j].Line
	})
	return out
}
