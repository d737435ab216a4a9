package admission

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// Refusals a Registry gives. Their text is the reason the wrapper logs (the
// hello reply's "REFUSED <reason>"); none names a flag, since the library
// does not know which one set the limit.
var (
	ErrNoToken    = errors.New("no access token")
	ErrWrongToken = errors.New("wrong access token")
	// ErrTooManyPending: the cap on hellos waiting for their debugger.
	ErrTooManyPending = errors.New("too many workers connecting at once")
	// ErrSessionLimit is what every SessionLimitError is (errors.Is).
	ErrSessionLimit = errors.New("session limit reached")
	// ErrAlreadyPending refuses a hello whose key (address and pid) a
	// hello from another connection holds: the first keeps its place.
	ErrAlreadyPending = errors.New("a hello from this address and pid is already waiting for its debugger " +
		"(the worker said hello twice, or another process holding the token posed as it)")
	// ErrNotPending: no hello waits under the key a debugger's connection
	// named (ClaimWithToken); the caller checks it as a worker that said
	// no hello.
	ErrNotPending = errors.New("no hello pending")
)

// SessionLimitError refuses a worker because Max sessions are admitted or
// promised to pending hellos. The text lives here only, for every front end.
type SessionLimitError struct{ Max int }

func (e *SessionLimitError) Error() string {
	return fmt.Sprintf("%v (%d debugged at once)", ErrSessionLimit, e.Max)
}

func (e *SessionLimitError) Is(target error) bool { return target == ErrSessionLimit }

// DefaultMaxPending bounds hellos waiting for their debugger's connection.
const DefaultMaxPending = 10000

// Config sets a Registry's rules. Zero values take the defaults.
type Config struct {
	// Token is what workers must present; empty accepts any (tests only).
	Token string
	// MaxSessions caps sessions admitted plus hellos pending; 0 = no cap.
	MaxSessions int
	// MaxPending caps hellos pending (default DefaultMaxPending).
	MaxPending int
	// TTL is how long an accepted hello waits (default DefaultHelloTTL).
	TTL time.Duration
}

// Registry admits workers: it checks a hello's token, holds accepted
// hellos until the worker's debugger connection claims them (or their TTL
// passes), and keeps sessions plus pending hellos under MaxSessions.
//
// A hello is kept under a key the front end chooses: the DAP front end keys
// by address and pid (AddrKey), since pydevd's handshake tells it the pid;
// the PyCharm front end by a one-time nonce the registry draws
// (AcceptNonce), since pydevd's thread list carries it back.
//
// The sessions themselves live in the front end, which passes how many it
// has admitted (active) to each call; it holds whatever lock keeps that
// count still during the call, so the check and the insertion are one step.
// mu is a leaf lock: the Registry never calls out, so front ends call it
// under their own locks, and its TTL timers take only mu.
type Registry struct {
	cfg Config

	mu      sync.Mutex
	pending map[string]*pending
	// fromCount is how many pending hellos came from each address.
	fromCount map[string]int
	// accepted remembers the last hellos accepted, by pydevd token, for
	// loss reports (ReadLoss); losses the last loss reports read, to
	// report each once.
	accepted *recent[TaskInfo]
	losses   *recent[struct{}]
}

type pending struct {
	from  string // the address the hello came from
	hello Hello  // verified, with its pydevd token
	timer *time.Timer
}

// NewRegistry returns an empty Registry with cfg's rules.
func NewRegistry(cfg Config) *Registry {
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultHelloTTL
	}
	return &Registry{cfg: cfg, pending: map[string]*pending{}, fromCount: map[string]int{},
		accepted: newRecent[TaskInfo](maxRememberedHellos), losses: newRecent[struct{}](maxRememberedHellos)}
}

// CheckToken compares a presented token with the configured one in
// constant time: nil, ErrNoToken or ErrWrongToken. Only a worker that said
// no hello (a plain debugpy.connect) presents the token itself.
func (r *Registry) CheckToken(token string) error {
	if r.cfg.Token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(r.cfg.Token)) == 1 {
		return nil
	}
	if token == "" {
		return ErrNoToken
	}
	return ErrWrongToken
}

// RemoteIP is the address part of a connection's remote address
// (host:port; all of it when it has no port): where a hello comes from, as
// a Registry and a RefusalLog key it.
func RemoteIP(remote string) string {
	if ip, _, err := net.SplitHostPort(remote); err == nil {
		return ip
	}
	return remote
}

// AddrKey is the key of a hello that its debugger's connection finds again
// by address and pid.
func AddrKey(ip string, pid int64) string { return ip + "\x00" + strconv.FormatInt(pid, 10) }

// ErrUnverified refuses a Hello that did not come out of Handshake.
var ErrUnverified = errors.New("hello not verified")

// Accept keeps a verified hello (from Handshake) under key, from the
// address from, until Claim or its TTL. A hello under a key already pending
// is refused with ErrAlreadyPending and the first is left as it was: a key
// names a process (AddrKey), and a process says one hello, so a second one
// under its key comes from someone else (through an SSH tunnel every
// worker has the agent's address, so anyone holding the token could pose
// as a pid) and must not take the real worker's place. active is how many
// sessions the caller has admitted.
func (r *Registry) Accept(key, from string, hello Hello, active int) error {
	if !hello.verified {
		return ErrUnverified
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, taken := r.pending[key]; taken {
		return ErrAlreadyPending
	}
	if err := r.roomLocked(active); err != nil {
		return err
	}
	p := &pending{from: from, hello: hello}
	// A timer per hello rather than a sweep on the next hello: a worker
	// whose debugger never came must not hold a session slot, or memory,
	// until someone else says hello.
	p.timer = time.AfterFunc(r.cfg.TTL, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.pending[key] == p {
			r.forgetLocked(key, p)
		}
	})
	r.pending[key] = p
	r.fromCount[from]++
	// Without its roots, which may be long: a loss report names the
	// worker only.
	info := hello.TaskInfo
	info.Roots = nil
	r.accepted.put(hello.pydevdToken, info)
	return nil
}

// forgetLocked drops the hello pending under key.
func (r *Registry) forgetLocked(key string, p *pending) {
	delete(r.pending, key)
	if r.fromCount[p.from]--; r.fromCount[p.from] <= 0 {
		delete(r.fromCount, p.from)
	}
}

// PendingFrom is how many accepted hellos from the address from wait for
// their debugger's connection: as many connections from there are
// expected, whose peers proved the token a moment ago.
func (r *Registry) PendingFrom(from string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fromCount[from]
}

// AcceptNonce is Accept under a fresh one-time nonce (128 random bits,
// hex), which it returns for the hello's reply.
func (r *Registry) AcceptNonce(from string, hello Hello, active int) (string, error) {
	if !hello.verified {
		return "", ErrUnverified
	}
	nonce, err := NewNonce()
	if err != nil {
		return "", err
	}
	return nonce, r.Accept(nonce, from, hello, active)
}

func (r *Registry) roomLocked(active int) error {
	if len(r.pending) >= r.cfg.MaxPending {
		return ErrTooManyPending
	}
	if r.cfg.MaxSessions > 0 && active+len(r.pending) >= r.cfg.MaxSessions {
		return &SessionLimitError{Max: r.cfg.MaxSessions}
	}
	return nil
}

// Claim takes the hello pending under key, once: only a connection from the
// same address, for the same pid, gets it; another leaves it pending. Use
// it where the key itself is the secret (AcceptNonce's); where it is not
// (AddrKey), ClaimWithToken.
func (r *Registry) Claim(key, from string, pid int64) (Hello, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pending[key]
	if !ok || p.from != from || p.hello.PID != pid {
		return Hello{}, false
	}
	p.timer.Stop()
	r.forgetLocked(key, p)
	return p.hello, true
}

// ClaimWithToken is Claim for a debugger's connection that presented the
// access token presented: it takes the hello only if presented is the
// pydevd token that hello derived (CheckPydevdToken), and otherwise leaves
// it pending for the real worker's debugger, so that a connection naming
// someone else's pid cannot use up their hello. Errors: ErrNotPending when
// no hello from this address and pid waits, else CheckPydevdToken's.
func (r *Registry) ClaimWithToken(key, from string, pid int64, presented string) (Hello, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pending[key]
	if !ok || p.from != from || p.hello.PID != pid {
		return Hello{}, ErrNotPending
	}
	if err := r.CheckPydevdToken(p.hello, presented); err != nil {
		return Hello{}, err
	}
	p.timer.Stop()
	r.forgetLocked(key, p)
	return p.hello, nil
}

// CheckPydevdToken checks the access token a pydevd connection presented
// against the one its claimed hello derived (constant time): nil,
// ErrNoToken or ErrWrongToken. The claim already made it single-use.
func (r *Registry) CheckPydevdToken(h Hello, presented string) error {
	switch {
	case r.cfg.Token == "":
		return nil
	case presented == "":
		return ErrNoToken
	case !h.verified || !equal(presented, h.pydevdToken):
		return ErrWrongToken
	}
	return nil
}

// PlausibleToken is the first, address-only check of a pydevd connection's
// access token, made before its pid is known: nil when presented is the
// real token (a plain debugpy.connect) or the one-time pydevd token of a
// hello pending from the address from; else ErrNoToken or ErrWrongToken.
// The exact check (CheckPydevdToken against the claimed hello, or
// CheckToken) still follows once the pid is known.
func (r *Registry) PlausibleToken(from, presented string) error {
	if r.cfg.Token == "" || equal(presented, r.cfg.Token) {
		return nil
	}
	if presented == "" {
		return ErrNoToken
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	match := false
	for _, p := range r.pending {
		// Every pending hello from this address is compared, in constant
		// time each, so the time taken says nothing about which matched.
		if p.from == from && p.hello.verified && equal(presented, p.hello.pydevdToken) {
			match = true
		}
	}
	if !match {
		return ErrWrongToken
	}
	return nil
}

// AdmitWithoutHello checks that a worker that said no hello (a plain
// debugpy.connect) has a free slot: nil or a *SessionLimitError.
func (r *Registry) AdmitWithoutHello(active int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cfg.MaxSessions > 0 && active+len(r.pending) >= r.cfg.MaxSessions {
		return &SessionLimitError{Max: r.cfg.MaxSessions}
	}
	return nil
}

// Pending lists the hellos waiting for their debugger.
func (r *Registry) Pending() []Hello {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Hello, 0, len(r.pending))
	for _, p := range r.pending {
		out = append(out, p.hello)
	}
	return out
}

// Close stops every pending hello's timer and forgets them.
func (r *Registry) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, p := range r.pending {
		p.timer.Stop()
		r.forgetLocked(k, p)
	}
}
