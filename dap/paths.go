package dap

import (
	"errors"
	"sort"

	"github.com/sparkdap/sparkdap/pathmap"
)

// The path mapper applied to the DAP traffic of one executor,
// through its pathmap.Cache: local → remote for breakpoints (every
// candidate path is tried), remote → local for everything that names a
// source on the way back.

// Mapping is one remote → local translation, for PathReport.
type Mapping = pathmap.Mapping

// breakpointTargets lists the executor paths a source breakpoint
// request goes to: the mapper's candidates for this executor, plus every
// path it was sent to before, so a removal reaches them all.
func (tx *held) breakpointTargets(es *ExecutorSession, e *bpEntry) []string {
	h := tx.h
	src, _ := e.args["source"].(map[string]any)
	local, _ := src["path"].(string)
	if h.cfg.Paths == nil || e.command != "setBreakpoints" || local == "" {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range es.paths.ToRemote(local) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	if sb := tx.exec(es).sent[e.key]; sb != nil {
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

// pathCarrier is a DAP object type with fields that hold a path the IDE
// may open.
type pathCarrier int

const (
	// carriesSource: a Source; its path (and those of its nested sources).
	carriesSource pathCarrier = iota + 1
	// carriesModule: a Module; its path and symbolFilePath.
	carriesModule
)

// pathKeys names every field of a DAP response or event body whose value
// is such an object, or a list of them, wherever it appears: the one
// table of where an executor's paths may reach the IDE.
//
//	source    StackFrame, Scope, Breakpoint (setBreakpoints and the
//	          breakpoint event), the output and loadedSource events, the
//	          locations response
//	sources   the loadedSources response, a Source's nested sources
//	location  a disassemble response's DisassembledInstruction
//	module    the module event
//	modules   the modules response
var pathKeys = map[string]pathCarrier{
	"source":   carriesSource,
	"sources":  carriesSource,
	"location": carriesSource,
	"module":   carriesModule,
	"modules":  carriesModule,
}

// modulePathFields are the fields of a Module that hold a path.
var modulePathFields = []string{"path", "symbolFilePath"}

// mapPaths makes the executor paths in a message body (a response
// to the IDE or an event) safe for the IDE, in one walk over every object
// pathKeys names: a path the mapper maps to a developer's file becomes
// that file; any other is removed, so a Source is shown by name with its
// code fetched from the executor through its sourceReference
// (confineSource), and a Module shows no path. Without a mapper
// (serve --no-path-mapping: the workers run here, as the developer) paths
// pass unchanged.
func (tx *held) mapPaths(es *ExecutorSession, v any) {
	if tx.h.cfg.Paths == nil {
		return
	}
	eachPathObject(v, func(kind pathCarrier, obj map[string]any) { tx.mapObjectPaths(es, kind, obj) })
}

// remotizePaths rewrites the local paths of the sources in a request for
// es (the same objects mapPaths maps in the other direction) to the
// executor's, where a mapping has been seen for them.
func (tx *held) remotizePaths(es *ExecutorSession, v any) {
	if tx.h.cfg.Paths == nil {
		return
	}
	eachPathObject(v, func(kind pathCarrier, obj map[string]any) {
		if p, ok := obj["path"].(string); ok && kind == carriesSource {
			if remote, ok := es.paths.RemoteOf(p); ok {
				obj["path"] = remote
			}
		}
	})
}

// eachPathObject calls visit for each object in v that pathKeys names,
// wherever it is, then walks on into it (a Source's nested sources): the
// one walk of both directions of the mapping.
func eachPathObject(v any, visit func(kind pathCarrier, obj map[string]any)) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if kind, ok := pathKeys[k]; ok {
				for _, obj := range objectsIn(e) {
					visit(kind, obj)
				}
			}
			eachPathObject(e, visit)
		}
	case []any:
		for _, e := range t {
			eachPathObject(e, visit)
		}
	}
}

// objectsIn is v when it is an object, the objects of v when it is a list.
func objectsIn(v any) []map[string]any {
	switch t := v.(type) {
	case map[string]any:
		return []map[string]any{t}
	case []any:
		out := make([]map[string]any, 0, len(t))
		for _, e := range t {
			if m, ok := e.(map[string]any); ok {
				out = append(out, m)
			}
		}
		return out
	}
	return nil
}

// mapObjectPaths maps or removes the paths of one object of kind.
func (tx *held) mapObjectPaths(es *ExecutorSession, kind pathCarrier, obj map[string]any) {
	switch kind {
	case carriesSource:
		tx.confineSource(es, obj)
		tx.localizeSource(es, obj)
	case carriesModule:
		for _, f := range modulePathFields {
			tx.mapModulePath(es, obj, f)
		}
	}
}

// mapModulePath turns a module's executor path in field into the
// developer's file, or drops it when there is none.
func (tx *held) mapModulePath(es *ExecutorSession, mod map[string]any, field string) {
	p, has := mod[field]
	if !has {
		return
	}
	if s, ok := p.(string); ok && s != "" {
		if r := tx.mapRemote(es, s); r.Err == nil {
			mod[field] = r.Mapping.Local
			return
		}
	}
	delete(mod, field)
}

func (tx *held) localizeSource(es *ExecutorSession, src map[string]any) {
	p, ok := src["path"].(string)
	if !ok || p == "" {
		return
	}
	r := tx.mapRemote(es, p)
	if r.Err != nil {
		return
	}
	src["path"] = r.Mapping.Local
	if _, has := src["sourceReference"]; has {
		src["sourceReference"] = 0 // the IDE reads the local file
	}
}

// mapRemote maps one executor path, once per executor and path, and
// logs each new outcome (`sparkdap paths` reports them all).
func (tx *held) mapRemote(es *ExecutorSession, remote string) pathmap.Result {
	r, fresh := es.paths.ToLocal(remote)
	if !fresh {
		return r
	}
	if r.Err == nil {
		m := r.Mapping
		es.logger().Debug().Str("remote", remote).Str("local", m.Local).Str("rule", m.Rule).Msg("path mapped")
	} else if errors.Is(r.Err, pathmap.ErrAmbiguous) {
		// The one outcome the user must act on (with an explicit rule).
		es.logger().Warn().Err(r.Err).Msg("path not mapped")
	} else {
		es.logger().Debug().Err(r.Err).Msg("path not mapped; the IDE gets the executor's copy")
	}
	return r
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
	tx := h.lock()
	defer tx.unlock()
	var out []PathReport
	for _, es := range tx.ready() {
		r := PathReport{Executor: es.id, Label: tx.exec(es).label(), Roots: es.paths.Roots()}
		r.Mapped, r.Unmapped = es.paths.Outcomes()
		r.Refused = tx.exec(es).refused()
		out = append(out, r)
	}
	return out
}
