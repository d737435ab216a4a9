package dap

import (
	"sort"
	"strings"
)

// This file keeps, per executor, what pydevd answered to the source
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

// expectAnswersLocked starts a new record for e on es: n requests are on
// their way.
func (es *ExecutorSession) expectAnswersLocked(e *bpEntry, n int) {
	if e.command != "setBreakpoints" {
		return
	}
	if es.refusals == nil {
		es.refusals = map[string]*bpAnswers{}
	}
	es.refusals[e.key] = &bpAnswers{entry: e, pending: n}
}

// answeredLocked folds one answer (bps nil: failed or timed out) into es's
// record for e, if it is still the latest.
func (es *ExecutorSession) answeredLocked(e *bpEntry, sentTo string, bps []any) {
	a := es.refusals[e.key]
	if a == nil || a.entry != e {
		return
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
}

// verifiedLocked records a breakpoint pydevd bound later (a breakpoint
// event).
func (es *ExecutorSession) verifiedLocked(e *bpEntry, i int) {
	if a := es.refusals[e.key]; a != nil && a.entry == e && i < len(a.pos) {
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
	}
	return 2
}

// explainRefusal adds to pydevd's reason what the developer can do about it.
func explainRefusal(msg string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(msg), "\n")
	switch {
	case strings.Contains(msg, "does not exist"):
		return first + " The executor has this file at none of the paths sparkdap tried: run `sparkdap paths` to see where its code lives, and add --map REMOTE=LOCAL to `sparkdap serve` if the mapping is wrong."
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

// refusalsLocked lists es's refused source breakpoints, once every answer
// is in.
func (es *ExecutorSession) refusalsLocked() []BreakpointRefusal {
	out := []BreakpointRefusal{}
	for _, a := range es.refusals {
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
