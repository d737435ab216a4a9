package guard

import "testing"

func TestGetNeedsTheLiveProof(t *testing.T) {
	var m, other Mutex
	g := New(&m, 1)
	h := m.Lock()
	*Get(&h, &g) = 2
	if v := *Get(&h, &g); v != 2 {
		t.Fatalf("Get = %d, want 2", v)
	}
	h.Unlock()
	if h.Holds() {
		t.Fatal("Holds after Unlock")
	}
	for name, f := range map[string]func(){
		"after Unlock":             func() { Get(&h, &g) },
		"second Unlock":            func() { h.Unlock() },
		"another mutex":            func() { o := other.Lock(); defer o.Unlock(); Get(&o, &g) },
		"zero Held (never locked)": func() { var z Held; Get(&z, &g) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatalf("no panic")
				}
			}()
			f()
		})
	}
	// The lock was released: it can be taken again.
	h = m.Lock()
	if v := *Get(&h, &g); v != 2 {
		t.Fatalf("Get = %d, want 2", v)
	}
	h.Unlock()
}

func TestZeroGuardedTakesItsFirstMutex(t *testing.T) {
	var m, other Mutex
	var g Guarded[int]
	h := m.Lock()
	*Get(&h, &g) = 3
	h.Unlock()
	o := other.Lock()
	defer o.Unlock()
	defer func() {
		if recover() == nil {
			t.Fatal("no panic reaching it with another mutex")
		}
	}()
	Get(&o, &g)
}
