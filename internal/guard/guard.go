// Package guard makes "this state is guarded by that mutex" something the
// compiler checks. A Guarded value's contents are reachable only through
// Get, which takes the proof of holding the lock that Mutex.Lock returns;
// Unlock consumes the proof, and a proof used after it panics. Code that
// touches guarded state without the lock does not compile, and code that
// keeps a proof past its Unlock fails the first time it runs.
package guard

import "sync"

// Mutex is a mutual exclusion lock whose holders get a proof of holding it.
// The zero value is unlocked.
type Mutex struct{ mu sync.Mutex }

// Held is the proof that a Mutex is held, from Mutex.Lock to Unlock. It is
// kept where Lock's caller put it and not copied: a copy would outlive
// Unlock unnoticed.
type Held struct{ m *Mutex }

// Lock takes m and returns the proof.
func (m *Mutex) Lock() Held {
	m.mu.Lock()
	return Held{m}
}

// Unlock releases the lock h proves and voids h: Get with it panics, and
// so does a second Unlock.
func (h *Held) Unlock() {
	m := h.m
	if m == nil {
		panic("guard: Unlock of a lock not held")
	}
	h.m = nil
	m.mu.Unlock()
}

// Holds reports whether h still proves its lock (Unlock not called).
func (h *Held) Holds() bool { return h.m != nil }

// Guarded is a T that only a holder of its lock may reach. The zero value
// holds T's zero value and belongs to the first Mutex it is reached with;
// New makes one that belongs to a given Mutex from the start.
type Guarded[T any] struct {
	m *Mutex
	v T
}

// New returns a Guarded holding v, which only m's holders may reach.
func New[T any](m *Mutex, v T) Guarded[T] { return Guarded[T]{m: m, v: v} }

// Get returns g's contents for the holder of h. It panics if h was
// unlocked, or proves a Mutex other than the one g belongs to.
func Get[T any](h *Held, g *Guarded[T]) *T {
	if h.m == nil {
		panic("guard: guarded state reached after Unlock")
	}
	if g.m != h.m {
		if g.m != nil {
			panic("guard: guarded state reached with another mutex held")
		}
		g.m = h.m
	}
	return &g.v
}
