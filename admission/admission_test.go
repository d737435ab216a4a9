package admission

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// hello is a hello as Handshake returns it once the proof checked out.
func hello(_ string, pid int64) Hello {
	return Hello{TaskInfo: TaskInfo{PID: pid, Host: "h"}, verified: true}
}

// waitPending waits, bounded, until n hellos are pending.
func waitPending(t *testing.T, r *Registry, n int) {
	t.Helper()
	for range 500 {
		if len(r.Pending()) == n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%d hellos pending, want %d", len(r.Pending()), n)
}

func TestToken(t *testing.T) {
	r := NewRegistry(Config{Token: "s3cret"})
	for _, tt := range []struct {
		token string
		want  error
	}{{"s3cret", nil}, {"", ErrNoToken}, {"s3cre", ErrWrongToken}, {"s3cret!", ErrWrongToken}} {
		if err := r.CheckToken(tt.token); !errors.Is(err, tt.want) {
			t.Errorf("token %q: %v, want %v", tt.token, err, tt.want)
		}
	}
	if err := NewRegistry(Config{}).CheckToken("anything"); err != nil {
		t.Errorf("no token configured refused %v", err)
	}
	// Only Handshake's hellos are accepted.
	unverified := Hello{TaskInfo: TaskInfo{PID: 1}}
	if err := r.Accept(AddrKey("ip", 1), "ip", unverified, 0); !errors.Is(err, ErrUnverified) {
		t.Errorf("unverified hello: %v", err)
	}
	if _, err := r.AcceptNonce("ip", unverified, 0); !errors.Is(err, ErrUnverified) {
		t.Errorf("unverified hello (nonce): %v", err)
	}
}

// TestTTLExpiresOnItsOwnTimer: a hello nobody claims gives back its slot
// after TTL with no other call to the registry in between.
func TestTTLExpiresOnItsOwnTimer(t *testing.T) {
	r := NewRegistry(Config{MaxSessions: 1, TTL: 50 * time.Millisecond})
	nonce, err := r.AcceptNonce("ip", hello("", 7), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.AdmitWithoutHello(0); !errors.Is(err, ErrSessionLimit) {
		t.Fatalf("the pending hello holds no slot: %v", err)
	}
	waitPending(t, r, 0)
	if _, ok := r.Claim(nonce, "ip", 7); ok {
		t.Error("an expired hello was claimed")
	}
	if err := r.AdmitWithoutHello(0); err != nil {
		t.Errorf("the expired hello still holds its slot: %v", err)
	}
}

func TestPendingCap(t *testing.T) {
	r := NewRegistry(Config{MaxPending: 2})
	for pid := int64(1); pid <= 2; pid++ {
		if _, err := r.AcceptNonce("ip", hello("", pid), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.AcceptNonce("ip", hello("", 3), 0); !errors.Is(err, ErrTooManyPending) {
		t.Errorf("third pending hello: %v, want ErrTooManyPending", err)
	}
}

// TestPendingHelloKeepsItsPlace: a second hello under a pending key (the
// same address and pid: through a tunnel, anyone holding the token can
// name another worker's pid) is refused and the first stays as it was,
// for its own debugger; a connection naming that pid with any other token
// cannot use it up either.
func TestPendingHelloKeepsItsPlace(t *testing.T) {
	r := NewRegistry(Config{Token: "s3cret", MaxPending: 1, MaxSessions: 1})
	k := AddrKey("ip", 9)
	real := Hello{TaskInfo: TaskInfo{PID: 9, Host: "real"}, verified: true, pydevdToken: "real-once"}
	if err := r.Accept(k, "ip", real, 0); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		posing := Hello{TaskInfo: TaskInfo{PID: 9, Host: "posing"}, verified: true, pydevdToken: "posing-once"}
		if err := r.Accept(k, "ip", posing, 0); !errors.Is(err, ErrAlreadyPending) {
			t.Fatalf("hello %d under a pending key: %v, want ErrAlreadyPending", i+2, err)
		}
	}
	for _, bad := range []string{"posing-once", "s3cret", ""} {
		if _, err := r.ClaimWithToken(k, "ip", 9, bad); err == nil || errors.Is(err, ErrNotPending) {
			t.Errorf("claim with token %q: %v, want a token refusal", bad, err)
		}
	}
	if p := r.Pending(); len(p) != 1 || p[0].Host != "real" {
		t.Fatalf("pending %+v, want the first hello alone", p)
	}
	got, err := r.ClaimWithToken(k, "ip", 9, "real-once")
	if err != nil || got.Host != "real" {
		t.Fatalf("the real worker's claim: %+v, %v", got, err)
	}
	if _, err := r.ClaimWithToken(k, "ip", 9, "real-once"); !errors.Is(err, ErrNotPending) {
		t.Errorf("second claim: %v, want ErrNotPending", err)
	}
	// Once claimed, the key is free for the next hello of that pid.
	if err := r.Accept(k, "ip", real, 0); err != nil {
		t.Errorf("hello after the claim: %v", err)
	}
}

func TestSessionLimit(t *testing.T) {
	r := NewRegistry(Config{MaxSessions: 2})
	for _, tt := range []struct {
		active, pending int
		refused         bool
	}{{0, 0, false}, {1, 0, false}, {2, 0, true}, {1, 1, true}, {0, 1, false}, {0, 2, true}} {
		r.Close()
		for i := range tt.pending {
			if _, err := r.AcceptNonce("ip", hello("", int64(100+i)), 0); err != nil {
				t.Fatal(err)
			}
		}
		err := r.AdmitWithoutHello(tt.active)
		_, err2 := r.AcceptNonce("ip", hello("", 1), tt.active)
		for _, e := range []error{err, err2} {
			if got := errors.Is(e, ErrSessionLimit); got != tt.refused {
				t.Errorf("%d active, %d pending: %v, refused want %v", tt.active, tt.pending, e, tt.refused)
			}
		}
		var sl *SessionLimitError
		if tt.refused && (!errors.As(err, &sl) || sl.Max != 2 || !strings.HasPrefix(err.Error(), "session limit reached")) {
			t.Errorf("refusal %v is not a SessionLimitError{2}", err)
		}
	}
	if err := NewRegistry(Config{}).AdmitWithoutHello(1 << 20); err != nil {
		t.Errorf("no limit refused: %v", err)
	}
}

// TestClaimOnce: a hello is claimed once, only by its own address and pid;
// a wrong claim leaves it for the right one.
func TestClaimOnce(t *testing.T) {
	r := NewRegistry(Config{})
	nonce, err := r.AcceptNonce("10.0.0.1", hello("", 42), 0)
	if err != nil || len(nonce) != 32 {
		t.Fatalf("nonce %q, %v", nonce, err)
	}
	other, _ := r.AcceptNonce("10.0.0.1", hello("", 42), 0)
	if other == nonce {
		t.Fatal("two hellos got one nonce")
	}
	for _, bad := range []struct {
		key, from string
		pid       int64
	}{{nonce, "10.0.0.2", 42}, {nonce, "10.0.0.1", 43}, {"guess", "10.0.0.1", 42}} {
		if _, ok := r.Claim(bad.key, bad.from, bad.pid); ok {
			t.Errorf("claim %+v succeeded", bad)
		}
	}
	h, ok := r.Claim(nonce, "10.0.0.1", 42)
	if !ok || h.PID != 42 || h.Host != "h" {
		t.Fatalf("claim: %+v, %v", h, ok)
	}
	if _, ok := r.Claim(nonce, "10.0.0.1", 42); ok {
		t.Error("a nonce was claimed twice")
	}
	if n := len(r.Pending()); n != 1 {
		t.Errorf("%d pending, want the other hello's 1", n)
	}
	k := AddrKey("10.0.0.1", 5)
	if err := r.Accept(k, "10.0.0.1", hello("", 5), 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Claim(k, "10.0.0.1", 5); !ok {
		t.Error("address-keyed hello not claimed")
	}
}
