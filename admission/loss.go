package admission

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// A worker's loss report: when a task ends, the wrapper waits (a few
// seconds at most) until its debugger has sent the proxy all of the task's
// output; when the proxy is frozen or too slow it gives up, and the output
// not delivered is in the executor's log only. It then says how much on a
// fresh connection to the executor port (the address of its hello), in one
// line, and closes without waiting for a reply (a frozen proxy's kernel
// still takes the connection and the line; the proxy reads it when it runs
// again):
//
//	wrapper → proxy:  SPARKDAP/2 LOST <wn> <pn> <bytes> <lines> <proof>\n
//
// wn and pn are the nonces of that worker's accepted hello, bytes and lines
// (decimal, at most 15 digits) the UTF-8 bytes and newlines of the output
// that did not reach the proxy, and proof is LossProof: HMAC(token,
// "sparkdap/2 lost", wn, pn "\n" bytes "\n" lines). The proxy sends nothing
// back.
const LossPrefix = HelloPrefix + "LOST "

const labelLost = "sparkdap/2 lost"

// maxLossLineBytes bounds a loss report's line: 16 + 32 + 32 + 15 + 15 +
// 64 bytes and its 5 separators, about 180. It has a bound of its own, not
// the hello's first line's (maxFirstLineBytes), which is shorter.
const maxLossLineBytes = 256

// maxLossDigits bounds each count's decimal digits (so it fits an int64).
const maxLossDigits = 15

// Errors of a loss report.
var (
	// ErrLossReport is what Registry.Handshake returns, reading nothing,
	// on a connection that starts with a loss report rather than a hello
	// (Registry.ReadLoss reads it); and what ServeHello returns once it
	// handled one: no worker to admit, nothing to reply.
	ErrLossReport = errors.New("loss report, not a hello")
	// ErrBadLoss marks a loss report line that cannot be parsed.
	ErrBadLoss = errors.New("bad loss report")
	// ErrLossProof: the report's proof does not match its fields and the
	// proxy's token (wrong token, or altered in transit).
	ErrLossProof = errors.New("wrong access token (loss report proof does not match)")
)

// LossReport is a verified loss report: how much of a worker's output did
// not reach the proxy before its task ended.
type LossReport struct {
	// WorkerNonce and ProxyNonce are the nonces of the worker's hello.
	WorkerNonce, ProxyNonce string
	// Bytes and Lines are the UTF-8 bytes and newlines lost.
	Bytes, Lines int64
	// Remote is the address the report came from (host:port).
	Remote string
	// Worker is what the worker's hello said (cleaned), when the proxy
	// still remembers that hello (Known): it remembers the last
	// maxRememberedHellos hellos it accepted. Its Label is the task of
	// the hello; a reused worker's later tasks are not known here.
	Worker TaskInfo
	Known  bool
}

// Label names the worker for people: executor, host and pid from its
// hello (Label without the hello's task, which may not be the task that
// lost the output), else the address the report came from.
func (l LossReport) Label() string {
	if l.Known {
		w := l.Worker
		w.Label = ""
		if s := Label(w); s != "" {
			return s
		}
	}
	return "at " + Clean(RemoteIP(l.Remote), MaxHostRunes)
}

// Message is the sentence both front ends print, in serve's log and the
// IDE's console.
func (l LossReport) Message() string {
	return fmt.Sprintf("worker %s: %d bytes (%d lines) of output did not reach the debugger before the task ended; "+
		"the executor's log has them", l.Label(), l.Bytes, l.Lines)
}

// LossProof is a loss report's proof: HMAC-SHA256(token, "sparkdap/2 lost"
// "\n" wn "\n" pn "\n" bytes "\n" lines) in lowercase hex, the counts in
// decimal as the line carries them.
func LossProof(token, wn, pn, bytes, lines string) string {
	return mac(token, labelLost, wn, pn+"\n"+bytes+"\n"+lines)
}

// ReportLoss is the worker's side of a loss report, as the wrapper sends
// it (for tests and tools written in Go; the wrapper's own is Python): it
// writes the line to w, a fresh connection to the executor port, for the
// hello whose nonces were wn and pn. The caller closes w without reading.
func ReportLoss(w io.Writer, token, wn, pn string, bytes, lines int64) error {
	if !isNonce(wn) || !isNonce(pn) {
		return fmt.Errorf("%w: want %d-digit hex nonces", ErrBadLoss, nonceHexLen)
	}
	b, l := strconv.FormatInt(bytes, 10), strconv.FormatInt(lines, 10)
	if !isCount(b) || !isCount(l) {
		return fmt.Errorf("%w: counts must be 0 to %d digits", ErrBadLoss, maxLossDigits)
	}
	_, err := io.WriteString(w, LossLine(token, wn, pn, bytes, lines))
	return err
}

// LossLine is the loss report line ReportLoss sends, newline included.
func LossLine(token, wn, pn string, bytes, lines int64) string {
	b, l := strconv.FormatInt(bytes, 10), strconv.FormatInt(lines, 10)
	return LossPrefix + wn + " " + pn + " " + b + " " + l + " " + LossProof(token, wn, pn, b, l) + "\n"
}

// isCount: 1 to maxLossDigits decimal digits.
func isCount(s string) bool {
	if len(s) == 0 || len(s) > maxLossDigits {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isLossReport reports whether the connection starts with a loss report,
// consuming nothing.
func isLossReport(br *bufio.Reader) bool {
	b, err := br.Peek(len(LossPrefix))
	return err == nil && string(b) == LossPrefix
}

// ParseLoss parses and verifies one loss report line (its newline
// optional) against token: the fields, then the proof (constant time).
// Errors are ErrBadLoss or ErrLossProof (errors.Is); they never quote the
// line. The report has no Remote and is not Known.
func ParseLoss(line []byte, token string) (LossReport, error) {
	if len(line) > maxLossLineBytes {
		return LossReport{}, fmt.Errorf("%w: longer than %d bytes", ErrBadLoss, maxLossLineBytes)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(line), "\n"), "\r")
	rest, ok := strings.CutPrefix(s, LossPrefix)
	if !ok {
		return LossReport{}, fmt.Errorf("%w: no %q", ErrBadLoss, LossPrefix)
	}
	f := strings.Split(rest, " ")
	if len(f) != 5 {
		return LossReport{}, fmt.Errorf("%w: want 5 fields separated by single spaces, got %d", ErrBadLoss, len(f))
	}
	wn, pn, b, l, proof := f[0], f[1], f[2], f[3], f[4]
	switch {
	case !isNonce(wn) || !isNonce(pn):
		return LossReport{}, fmt.Errorf("%w: want two %d-digit lowercase hex nonces", ErrBadLoss, nonceHexLen)
	case !isCount(b) || !isCount(l):
		return LossReport{}, fmt.Errorf("%w: want byte and line counts of 1 to %d decimal digits", ErrBadLoss, maxLossDigits)
	case len(proof) != 64:
		return LossReport{}, fmt.Errorf("%w: want a 64-digit hex proof", ErrBadLoss)
	}
	if !equal(proof, LossProof(token, wn, pn, b, l)) {
		return LossReport{}, ErrLossProof
	}
	bytes, err1 := strconv.ParseInt(b, 10, 64)
	lines, err2 := strconv.ParseInt(l, 10, 64)
	if err1 != nil || err2 != nil { // cannot happen: 15 digits fit
		return LossReport{}, fmt.Errorf("%w: counts out of range", ErrBadLoss)
	}
	return LossReport{WorkerNonce: wn, ProxyNonce: pn, Bytes: bytes, Lines: lines}, nil
}

// ReadLoss reads a loss report (on a connection Handshake returned
// ErrLossReport for), verifies it against the Registry's token, and fills
// in what the Registry remembers of its hello (Known, Worker). first is
// false for a report this Registry already returned (the same nonces and
// counts): the caller reports it once. Errors are ErrBadLoss, ErrLossProof
// (errors.Is), or reading failed.
func (r *Registry) ReadLoss(br *bufio.Reader, remote string) (rep LossReport, first bool, err error) {
	line, err := readLine(br, maxLossLineBytes)
	if err != nil {
		if errors.Is(err, ErrBadHello) {
			return LossReport{}, false, fmt.Errorf("%w: longer than %d bytes", ErrBadLoss, maxLossLineBytes)
		}
		return LossReport{}, false, fmt.Errorf("reading loss report: %w", errors.Unwrap(err))
	}
	rep, err = ParseLoss(line, r.cfg.Token)
	if err != nil {
		return LossReport{}, false, err
	}
	rep.Remote = remote
	seen := rep.WorkerNonce + " " + rep.ProxyNonce + " " + strconv.FormatInt(rep.Bytes, 10) + " " + strconv.FormatInt(rep.Lines, 10)
	r.mu.Lock()
	defer r.mu.Unlock()
	rep.Worker, rep.Known = r.accepted.get(PydevdToken(r.cfg.Token, rep.WorkerNonce, rep.ProxyNonce))
	first = !r.losses.has(seen)
	if first {
		r.losses.put(seen, struct{}{})
	}
	return rep, first, nil
}

// maxRememberedHellos is how many accepted hellos a Registry remembers,
// for loss reports (and how many loss reports, to report each once).
const maxRememberedHellos = 1024

// recent maps keys to values, remembering the last max keys put.
type recent[V any] struct {
	m     map[string]V
	order []string // keys, oldest at next once full
	next  int
	max   int
}

func newRecent[V any](max int) *recent[V] { return &recent[V]{m: map[string]V{}, max: max} }

func (c *recent[V]) get(k string) (V, bool) { v, ok := c.m[k]; return v, ok }

func (c *recent[V]) has(k string) bool { _, ok := c.m[k]; return ok }

func (c *recent[V]) put(k string, v V) {
	if _, ok := c.m[k]; ok {
		c.m[k] = v
		return
	}
	if len(c.order) < c.max {
		c.order = append(c.order, k)
	} else {
		delete(c.m, c.order[c.next])
		c.order[c.next] = k
		c.next = (c.next + 1) % c.max
	}
	c.m[k] = v
}
