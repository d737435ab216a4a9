package dap

import (
	"errors"
	"sort"
)

// This file applies the PathMapper to the DAP traffic of one executor:
// local → remote for breakpoints (every candidate path is tried), remote →
// local for everything that names a source on the way back.

// pathResult caches one remote path's mapping.
type pathResult struct {
	m   Mapping
	err error
}

// breakpointTargetsLocked lists the executor paths a source breakpoint
// request goes to: the mapper's candidates for this executor, plus every
// path it was sent to before, so a removal reaches them all.
func (h *Hub) breakpointTargetsLocked(es *ExecutorSession, e *bpEntry) []string {
	src, _ := e.args["source"].(map[string]any)
	local, _ := src["path"].(string)
	if h.cfg.Paths == nil || e.command != "setBreakpoints" || local == "" {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range h.cfg.Paths.ToRemote(local, es.roots) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	if sb := es.sent[e.key]; sb != nil {
		for p := range sb.sources {
			if p != "" && !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	return out
}

// localizePathsLocked rewrites the executor paths in a message body to the
// developer's files. A path with no local file stays as it is, with its
// sourceReference, so the IDE fetches the code from the executor instead.
func (h *Hub) localizePathsLocked(es *ExecutorSession, v any) {
	if h.cfg.Paths == nil {
		return
	}
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			switch k {
			case "source":
				if src, ok := e.(map[string]any); ok {
					h.localizeSourceLocked(es, src)
				}
			case "module":
				if mod, ok := e.(map[string]any); ok {
					if p, ok := mod["path"].(string); ok {
						if r := h.mapRemoteLocked(es, p); r.err == nil {
							mod["path"] = r.m.Local
						}
					}
				}
			default:
				h.localizePathsLocked(es, e)
			}
		}
	case []any:
		for _, e := range t {
			h.localizePathsLocked(es, e)
		}
	}
}

func (h *Hub) localizeSourceLocked(es *ExecutorSession, src map[string]any) {
	p, ok := src["path"].(string)
	if !ok || p == "" {
		return
	}
	r := h.mapRemoteLocked(es, p)
	if r.err != nil {
		return
	}
	src["path"] = r.m.Local
	if _, has := src["sourceReference"]; has {
		src["sourceReference"] = 0 // the IDE reads the local file
	}
}

// mapRemoteLocked maps one executor path, once per executor and path, and
// reports each new outcome for `sparkdap serve`'s path report.
func (h *Hub) mapRemoteLocked(es *ExecutorSession, remote string) pathResult {
	if r, ok := es.paths[remote]; ok {
		return r
	}
	m, err := h.cfg.Paths.ToLocal(remote, es.roots)
	r := pathResult{m, err}
	if es.paths == nil {
		es.paths = map[string]pathResult{}
		es.remoteOf = map[string]string{}
	}
	es.paths[remote] = r
	if err == nil {
		es.remoteOf[m.Local] = remote
		es.logger().Debug().Str("remote", remote).Str("local", m.Local).Str("rule", m.Rule).Msg("path mapped")
	} else if errors.Is(err, ErrAmbiguous) {
		// The one outcome the user must act on (with --map).
		es.logger().Warn().Err(err).Msg("path not mapped")
	} else {
		es.logger().Debug().Err(err).Msg("path not mapped; the IDE gets the executor's copy")
	}
	return r
}

// remotizePathsLocked rewrites local paths in a request for es to the
// executor's, where a mapping has been seen for them.
func (h *Hub) remotizePathsLocked(es *ExecutorSession, v any) {
	if h.cfg.Paths == nil {
		return
	}
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if src, ok := e.(map[string]any); ok && k == "source" {
				if p, ok := src["path"].(string); ok {
					if remote, ok := es.remoteOf[p]; ok {
						src["path"] = remote
					}
				}
				continue
			}
			h.remotizePathsLocked(es, e)
		}
	case []any:
		for _, e := range t {
			h.remotizePathsLocked(es, e)
		}
	}
}

// PathReport is what one executor's mapper did, for `sparkdap paths`.
type PathReport struct {
	Executor uint64    `json:"executor"`
	Label    string    `json:"label"`
	Roots    Roots     `json:"roots"`
	Mapped   []Mapping `json:"mapped"`
	Unmapped []string  `json:"unmapped"`
	// Refused lists the source breakpoints this executor could set at
	// none of the paths tried, with pydevd's reason.
	Refused []BreakpointRefusal `json:"refused"`
}

// PathReports lists, per executor, each mapping applied, each path that
// could not be mapped (with why) and each breakpoint it refused.
func (h *Hub) PathReports() []PathReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []PathReport
	for _, es := range h.readyLocked() {
		r := PathReport{Executor: es.id, Label: es.Label(), Roots: es.roots, Mapped: []Mapping{}, Unmapped: []string{}}
		for _, p := range es.paths {
			if p.err == nil {
				r.Mapped = append(r.Mapped, p.m)
			} else {
				r.Unmapped = append(r.Unmapped, p.err.Error())
			}
		}
		sort.Slice(r.Mapped, func(i, j int) bool { return r.Mapped[i].Remote < r.Mapped[j].Remote })
		sort.Strings(r.Unmapped)
		r.Refused = es.refusalsLocked()
		out = append(out, r)
	}
	return out
}
