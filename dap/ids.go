package dap

import (
	"fmt"
	"sync"
)

// idKind is a namespace of per-process ids that pydevd hands out.
type idKind uint8

const (
	kindThread idKind = iota
	kindFrame
	kindVariables
	kindSource
	nKinds
)

var kindNames = [nKinds]string{"threadId", "frameId", "variablesReference", "sourceReference"}

func (k idKind) String() string { return kindNames[k] }

// maxGlobalID keeps ids within what DAP clients accept (variablesReference
// must be at most 2^31-1).
const maxGlobalID = 1<<31 - 1

// idOwner is what a global id stands for: a local id in one executor session.
type idOwner struct {
	session uint64
	local   int64
}

// idTable maps every executor's local ids into one global space per kind, so
// that ids from different processes never collide in the IDE. Globals are
// allocated from a counter that wraps and skips ids still in use; they are
// released per session and kind when what they name stops being valid
// (frames and variables on resume, everything on disconnect). mu guards
// the rest and is a leaf: taken under the Hub's lock or alone, never held
// while calling out.
type idTable struct {
	mu       sync.Mutex
	next     [nKinds]int64
	owners   [nKinds]map[int64]idOwner
	sessions map[uint64]*[nKinds]map[int64]int64 // session → local → global
}

// newIDTable returns an empty table.
func newIDTable() *idTable {
	t := &idTable{sessions: make(map[uint64]*[nKinds]map[int64]int64)}
	for k := range t.owners {
		t.owners[k] = make(map[int64]idOwner)
	}
	return t
}

// Global returns the global id for session's local id, allocating one on
// first sight.
func (t *idTable) Global(kind idKind, session uint64, local int64) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	locals := t.sessions[session]
	if locals == nil {
		locals = new([nKinds]map[int64]int64)
		t.sessions[session] = locals
	}
	if locals[kind] == nil {
		locals[kind] = make(map[int64]int64)
	}
	if g, ok := locals[kind][local]; ok {
		return g, nil
	}
	owners := t.owners[kind]
	if len(owners) >= maxGlobalID-1 {
		return 0, fmt.Errorf("%s space exhausted", kind)
	}
	g := t.next[kind]
	for {
		g++
		if g > maxGlobalID {
			g = 1
		}
		if _, used := owners[g]; !used {
			break
		}
	}
	t.next[kind] = g
	owners[g] = idOwner{session: session, local: local}
	locals[kind][local] = g
	return g, nil
}

// Local resolves a global id to its session and local id.
func (t *idTable) Local(kind idKind, global int64) (idOwner, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o, ok := t.owners[kind][global]
	return o, ok
}

// Release forgets session's ids of the given kinds.
func (t *idTable) Release(session uint64, kinds ...idKind) {
	t.mu.Lock()
	defer t.mu.Unlock()
	locals := t.sessions[session]
	if locals == nil {
		return
	}
	for _, k := range kinds {
		for _, g := range locals[k] {
			delete(t.owners[k], g)
		}
		locals[k] = nil
	}
}

// ReleaseOne forgets one local id (a thread that exited).
func (t *idTable) ReleaseOne(kind idKind, session uint64, local int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if locals := t.sessions[session]; locals != nil {
		if g, ok := locals[kind][local]; ok {
			delete(t.owners[kind], g)
			delete(locals[kind], local)
		}
	}
}

// Forget drops everything of a session that has gone.
func (t *idTable) Forget(session uint64) {
	t.Release(session, kindThread, kindFrame, kindVariables, kindSource)
	t.mu.Lock()
	delete(t.sessions, session)
	t.mu.Unlock()
}

// Len reports how many global ids of kind are in use (for tests and stats).
func (t *idTable) Len(kind idKind) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.owners[kind])
}
