//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// These tests print tens of megabytes at the end of a debugged task
// (testdata/big_output.py: numbered lines of 80 bytes) and check what
// reaches the IDE: all of it, in order, when the proxy keeps up, even as
// the job ends right after the task; and, when the proxy is frozen, a
// worker that gives up within SPARKDAP_OUTPUT_FLUSH_TIMEOUT and says how
// much never arrived, in the executor's log, serve's log and the IDE.

const (
	bigOutputLineWidth = 80      // bytes per line, newline included (big_output.py's LINE_WIDTH)
	bigOutputLines     = 500_000 // 40 MB
)

// bigOutputScript is the absolute path of testdata/big_output.py.
func bigOutputScript(t testing.TB) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "big_output.py"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ideOutput follows the output events one IDE connection receives and
// reads big_output.py's numbered lines out of them.
type ideOutput struct {
	mu       sync.Mutex
	partial  map[string]string // per category: text after its last newline
	seqs     []int             // the numbered lines, in arrival order
	bad      []string          // numbered lines that arrived cut or garbled (first few)
	notes    []string          // other output lines that mention sparkdap (first few)
	lost     []string          // output lines that say output did not reach the debugger, after their category
	category string            // of the event being read
	events   int
	bytes    int64
	first    time.Time
	last     time.Time
	lineAt   time.Time // when the latest numbered line arrived
}

// bigLineSeq reads a whole numbered line, `sparkdap-line (\d{7}) (x+)$`
// of bigOutputLineWidth-1 bytes, after whatever label precedes it. By
// hand: a regexp costs this process as much CPU as serve spends relaying
// the lines, which the output benchmark would time too.
func bigLineSeq(line string) (int, bool) {
	const prefix = "sparkdap-line "
	i := strings.LastIndex(line, prefix)
	if i < 0 {
		return 0, false
	}
	rest := line[i+len(prefix):]
	if len(prefix)+len(rest) != bigOutputLineWidth-1 || len(rest) < 9 || rest[7] != ' ' {
		return 0, false
	}
	seq := 0
	for _, c := range []byte(rest[:7]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		seq = seq*10 + int(c-'0')
	}
	if strings.Trim(rest[8:], "x") != "" {
		return 0, false
	}
	return seq, true
}

// followOutput reads ide's output events, as they come, until ctx ends or
// the connection closes.
func followOutput(ctx context.Context, ide *dapclient.Client) *ideOutput {
	o := &ideOutput{partial: map[string]string{}}
	go func() {
		for {
			ev, err := ide.WaitEvent(ctx, "output", nil)
			if err != nil {
				return
			}
			category, text, err := dapclient.DecodeOutput(ev.Body)
			if err != nil {
				continue
			}
			o.add(category, text)
		}
	}()
	return o
}

func (o *ideOutput) add(category, text string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	if o.events == 0 {
		o.first = now
	}
	o.events++
	o.bytes += int64(len(text))
	o.last = now
	o.category = category
	text = o.partial[category] + text
	i := strings.LastIndexByte(text, '\n')
	if i < 0 {
		o.partial[category] = text
		return
	}
	o.partial[category] = text[i+1:]
	for _, line := range strings.Split(text[:i], "\n") {
		o.line(line)
	}
}

// line takes one whole output line (after the label merged mode puts
// before it).
func (o *ideOutput) line(line string) {
	if strings.Contains(line, "did not reach the debugger") {
		o.lost = append(o.lost, o.category+": "+line)
	}
	if !strings.Contains(line, "sparkdap-line ") {
		if strings.Contains(line, "sparkdap") && len(o.notes) < 20 {
			o.notes = append(o.notes, line)
		}
		return
	}
	seq, ok := bigLineSeq(line)
	if !ok {
		if len(o.bad) < 5 {
			o.bad = append(o.bad, line)
		}
		return
	}
	o.seqs = append(o.seqs, seq)
	o.lineAt = o.last
}

// snapshot is what arrived so far.
// waitEnd returns once line lines-1 arrived, or once nothing arrived for
// 10 s after the job ended at ended (90 s after it at most).
func (o *ideOutput) waitEnd(lines int, ended time.Time) {
	for {
		seqs, _, _, _, last := o.snapshot()
		if len(seqs) > 0 && seqs[len(seqs)-1] == lines-1 {
			return
		}
		quiet := time.Since(ended)
		if !last.IsZero() && last.After(ended) {
			quiet = time.Since(last)
		}
		if quiet > 10*time.Second || time.Since(ended) > 90*time.Second {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (o *ideOutput) snapshot() (seqs []int, events int, bytes int64, first, last time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]int(nil), o.seqs...), o.events, o.bytes, o.first, o.last
}

func (o *ideOutput) lossLines() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.lost...)
}

// seqSummary says how far seqs is from 0..n-1 in order: the lines missing
// (as ranges, first few), repeated, and out of order.
type seqSummary struct {
	got, distinct, missing, dups, outOfOrder int
	maxSeq                                   int
	missingRanges                            []string
	tailMissing                              int // missing lines after the last one that arrived
}

func summarize(seqs []int, n int) seqSummary {
	s := seqSummary{got: len(seqs), maxSeq: -1}
	seen := make([]bool, n)
	prev := -1
	for _, q := range seqs {
		if q < 0 || q >= n {
			s.outOfOrder++
			continue
		}
		if seen[q] {
			s.dups++
		} else {
			seen[q] = true
			s.distinct++
		}
		if q <= prev {
			s.outOfOrder++
		}
		prev = q
		s.maxSeq = max(s.maxSeq, q)
	}
	for i := 0; i < n; {
		if seen[i] {
			i++
			continue
		}
		j := i
		for j < n && !seen[j] {
			j++
		}
		s.missing += j - i
		if len(s.missingRanges) < 8 {
			s.missingRanges = append(s.missingRanges, fmt.Sprintf("%d..%d (%d)", i, j-1, j-i))
		}
		i = j
	}
	s.tailMissing = n - 1 - s.maxSeq
	return s
}

func (s seqSummary) String() string {
	return fmt.Sprintf("%d numbered lines arrived, %d distinct, %d missing (%d after the last that arrived, line %d), %d repeated, %d out of order; missing: %s",
		s.got, s.distinct, s.missing, s.tailMissing, s.maxSeq, s.dups, s.outOfOrder, strings.Join(s.missingRanges, ", "))
}

// cutMidMessage matches serve's log lines saying a connection ended in
// the middle of a DAP message.
var cutMidMessage = regexp.MustCompile(`(?m)^.*(reading \d+-byte body|unexpected EOF|reading header).*$`)

// TestSparkTaskOutputArrivesWhole: one debugged task of a real local Spark
// job prints 40 MB (500,000 numbered lines of 80 bytes) and the job ends
// right after it (spark.stop, exit). Every line reaches the IDE, attached
// in merged mode, in order, none twice, the last one included, and
// serve's log shows no connection cut in the middle of a message.
func TestSparkTaskOutputArrivesWhole(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	ctx := testContext(t, 5*time.Minute)
	p := startProxy(t, ctx)
	checkTaskOutputWhole(t, ctx, p, p.Executors, bigOutputLines)
}

// checkTaskOutputWhole attaches an IDE to p in merged mode, runs
// big_output.py's job through `sparkdap submit --proxy executors` with
// partition 0 debugged and printing lines, and checks that every line
// reaches the IDE, in order, once each.
func checkTaskOutputWhole(t testing.TB, ctx context.Context, p *proxy, executors string, lines int) {
	runTaskOutput(t, ctx, p, executors, lines).check(t, p, lines)
}

// taskOutputRun is one debugged run of big_output.py's job and what its
// IDE got.
type taskOutputRun struct {
	out    *ideOutput
	job    *sparkRun
	ended  time.Time
	result map[string]any // the job's out.json
}

// runTaskOutput is checkTaskOutputWhole's run: it returns once the IDE
// has the last line, or has given up waiting for it (waitEnd).
func runTaskOutput(t testing.TB, ctx context.Context, p *proxy, executors string, lines int) *taskOutputRun {
	ide := dialIDE(t, ctx, p.IDE)
	if _, err := ide.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := ide.Attach(ctx, map[string]any{"justMyCode": false}, nil); err != nil {
		t.Fatal(err)
	}
	out := followOutput(ctx, ide)

	dir := t.TempDir()
	script := filepath.Join(dir, "big_output.py")
	copyFile(t, bigOutputScript(t), script)
	result := filepath.Join(dir, "out.json")
	job := startSpark(t, ctx, dir, []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(t),
		"submit", "--proxy", executors, "--partitions", "0", "--",
		"--master", "local[2]", script, "job", result, strconv.Itoa(lines))
	job.wait(t, ctx)
	r := &taskOutputRun{out: out, job: job, ended: time.Now(), result: readJSON(t, result)}
	if got := r.result["count"]; got != float64(8) {
		t.Errorf("count = %v, want 8", got)
	}
	t.Logf("the job ran %v", job.elapsed.Round(100*time.Millisecond))

	// The worker is gone with the job: what it sent is in flight (through
	// the tunnel too, with --ssh) or arrived.
	out.waitEnd(lines, r.ended)
	return r
}

// check is checkTaskOutputWhole's checks of a run, against p's log.
func (r *taskOutputRun) check(t testing.TB, p *proxy, lines int) {
	out, job, ended := r.out, r.job, r.ended
	seqs, events, bytes, first, last := out.snapshot()
	s := summarize(seqs, lines)
	attached := regexp.MustCompile(`(?m)^sparkdap: \+ executor \d+ attached \[(.*)\]$`).FindAllString(p.Log(), -1)
	t.Logf("%d output events, %d bytes of output text at the IDE with merged mode's labels (%d bytes printed), the first %v after the job started, the last %v after it ended (%v after the first: %.1f MB/s); %d debugged worker(s): %q",
		events, bytes, lines*bigOutputLineWidth, first.Sub(job.started).Round(time.Millisecond),
		last.Sub(ended).Round(time.Millisecond), last.Sub(first).Round(time.Millisecond),
		float64(bytes)/1e6/max(last.Sub(first).Seconds(), 1e-3), len(attached), attached)
	t.Logf("at the IDE: %v", s)
	t.Logf("the job ended at %s; serve: %q", ended.Format("15:04:05.000"),
		regexp.MustCompile(`(?m)^.* executor detached .*$`).FindAllString(p.Log(), -1))
	out.mu.Lock()
	notes, bad := out.notes, out.bad
	out.mu.Unlock()
	if len(notes) > 0 {
		t.Logf("other sparkdap lines at the IDE: %q", notes)
	}
	if lost := out.lossLines(); len(lost) > 0 {
		t.Logf("the IDE was told of lost output: %q", lost)
	}
	if len(attached) != 1 {
		t.Errorf("%d debug sessions, want 1 (partition 0's)", len(attached))
	}
	if len(bad) > 0 {
		t.Errorf("numbered lines arrived cut or garbled: %q", bad)
	}
	if s.missing > 0 || s.dups > 0 || s.outOfOrder > 0 {
		t.Errorf("the IDE did not get the task's %d lines whole, in order, once each: %v", lines, s)
	}
	if s.maxSeq != lines-1 {
		t.Errorf("the last line (%d) never reached the IDE; the last that did: %d", lines-1, s.maxSeq)
	}
	if cut := cutMidMessage.FindAllString(p.Log(), 5); len(cut) > 0 {
		t.Errorf("serve's log shows a connection cut in the middle of a message:\n%s", strings.Join(cut, "\n"))
	}
}

// bigOutputWorker is testdata/big_output.py run as a wrapper worker
// without Spark: its stdout (the numbered lines, as the executor log gets
// them) goes to a file, its stderr to a buffer.
type bigOutputWorker struct {
	pid     int
	stdout  string
	stderr  *syncbuf.Buffer
	exited  chan struct{}
	exitErr error
	exitAt  time.Time
}

func startBigOutputWorker(t testing.TB, ctx context.Context, wrapper, executors string, lines int, env ...string) *bigOutputWorker {
	t.Helper()
	w := &bigOutputWorker{stdout: filepath.Join(t.TempDir(), "stdout"), stderr: &syncbuf.Buffer{}, exited: make(chan struct{})}
	f, err := os.Create(w.stdout)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(python(t), "-X", "frozen_modules=off", bigOutputScript(t), "worker",
		"--wrapper", wrapper, "--lines", strconv.Itoa(lines))
	cmd.Env = append(os.Environ(), append([]string{"PYDEVD_DISABLE_FILE_VALIDATION=1",
		"SPARKDAP_TOKEN=" + testToken, "SPARKDAP_PROXY=" + executors}, env...)...)
	cmd.Stdout, cmd.Stderr = f, w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.pid = cmd.Process.Pid
	go func() {
		w.exitErr = cmd.Wait()
		w.exitAt = time.Now()
		close(w.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-w.exited:
		default:
			_ = cmd.Process.Kill()
			<-w.exited
		}
		if t.Failed() {
			t.Logf("worker (pid %d) stderr (last 8 KiB):\n%s", w.pid, tail(w.stderr.String(), 8<<10))
		}
	})
	return w
}

// mark waits for the worker's stderr line starting with prefix (one of
// big_output.py's marks) and returns when the worker wrote it.
func (w *bigOutputWorker) mark(t testing.TB, ctx context.Context, prefix string) (string, time.Time) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(prefix) + `(.*) (\d+\.\d+)$`)
	for {
		if m := re.FindStringSubmatch(w.stderr.String()); m != nil {
			sec, _ := strconv.ParseFloat(m[2], 64)
			return strings.TrimSpace(m[1]), time.Unix(0, int64(sec*1e9))
		}
		select {
		case <-w.exited:
			if m := re.FindStringSubmatch(w.stderr.String()); m != nil {
				continue
			}
			t.Fatalf("the worker exited (%v) before it wrote %q", w.exitErr, prefix)
		case <-ctx.Done():
			t.Fatalf("the worker never wrote %q: %v", prefix, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// printed is how many bytes the worker has written to its stdout.
func (w *bigOutputWorker) printed() int64 {
	fi, err := os.Stat(w.stdout)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// lossNumbers finds "<n> bytes" and "<n> lines" (or a log's bytes=<n>
// and lines=<n>) in a loss report.
var (
	lossBytesRE = regexp.MustCompile(`([0-9][0-9,]*) bytes|\bbytes=([0-9]+)`)
	lossLinesRE = regexp.MustCompile(`([0-9][0-9,]*) lines|\blines=([0-9]+)`)
)

func lossNumbers(line string) (bytes, lines int64) {
	num := func(re *regexp.Regexp) int64 {
		m := re.FindStringSubmatch(line)
		if m == nil {
			return 0
		}
		n, _ := strconv.ParseInt(strings.ReplaceAll(m[1]+m[2], ",", ""), 10, 64)
		return n
	}
	return num(lossBytesRE), num(lossLinesRE)
}

// lossRE matches a line that reports output lost on the way to the IDE.
var lossRE = regexp.MustCompile(`(?m)^.*did not reach the debugger.*$`)

// TestOutputFlushBoundWhenProxyFrozen: a real wrapper worker (real
// debugpy, no Spark) prints 40 MB in its task; once it is connected and
// printing, serve is frozen (SIGSTOP). With SPARKDAP_OUTPUT_FLUSH_TIMEOUT=2
// the worker's end of task gives up waiting for its output to be sent
// within that bound (plus a margin), says on its stderr how much never
// reached the debugger, and exits; after SIGCONT serve logs the loss at
// Warn and the IDE's console shows it, with non-zero bytes and lines.
func TestOutputFlushBoundWhenProxyFrozen(t *testing.T) {
	testenv.SkipIfShort(t, "starts a debugpy worker")
	ctx := testContext(t, 4*time.Minute)
	const (
		flushTimeout = 2 * time.Second
		margin       = 8 * time.Second
	)
	wrapper := t.TempDir()
	if out, err := exec.CommandContext(ctx, sparkdapBinary(t), "wrap", "-o", wrapper, "--ship-debugger", "never").CombinedOutput(); err != nil {
		t.Fatalf("sparkdap wrap: %v\n%s", err, out)
	}
	p := startFaultProxy(t, ctx)
	ide := dialIDE(t, ctx, p.IDE)
	if _, err := ide.Initialize(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := ide.Attach(ctx, map[string]any{"justMyCode": false}, nil); err != nil {
		t.Fatal(err)
	}
	out := followOutput(ctx, ide)

	w := startBigOutputWorker(t, ctx, wrapper, p.Executors, bigOutputLines,
		"SPARKDAP_OUTPUT_FLUSH_TIMEOUT="+strconv.Itoa(int(flushTimeout/time.Second)))
	if state, _ := w.mark(t, ctx, "CONNECTED"); state != "connected" {
		t.Fatalf("the wrapper says the debugger is %q, want connected", state)
	}
	// Printing: a few MB out, most of the 40 still to come.
	for w.printed() < 2<<20 {
		select {
		case <-w.exited:
			t.Fatalf("the worker exited (%v) before it printed 2 MB", w.exitErr)
		case <-ctx.Done():
			t.Fatalf("the worker never printed 2 MB: %v", ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(thaw)
	t.Logf("serve frozen with %d bytes printed", w.printed())

	// The task's writes may be held back a while by a proxy that takes
	// nothing; its end of task may then wait flushTimeout without progress.
	bounded, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	_, printedAt := w.mark(t, bounded, "PRINTED")
	select {
	case <-w.exited:
	case <-time.After(flushTimeout + margin - time.Since(printedAt)):
		thaw()
		t.Fatalf("the worker still runs %v after its task printed its last line, %v after serve froze: its end of task is not bounded by SPARKDAP_OUTPUT_FLUSH_TIMEOUT=%v",
			time.Since(printedAt).Round(100*time.Millisecond), time.Since(frozen).Round(100*time.Millisecond), flushTimeout)
	}
	t.Logf("serve frozen → task printed its last line %v → worker exited %v later (%v); exit: %v",
		printedAt.Sub(frozen).Round(10*time.Millisecond), w.exitAt.Sub(printedAt).Round(10*time.Millisecond),
		w.exitAt.Sub(frozen).Round(10*time.Millisecond), w.exitErr)
	if w.exitErr != nil {
		t.Errorf("the worker exited with %v, want 0", w.exitErr)
	}
	if got := w.printed(); got != bigOutputLines*bigOutputLineWidth {
		t.Errorf("the executor log (the worker's stdout) has %d bytes, want all %d", got, bigOutputLines*bigOutputLineWidth)
	}
	stderrLoss := lossRE.FindString(w.stderr.String())
	if stderrLoss == "" {
		t.Errorf("the worker's stderr (the executor log) has no line saying output did not reach the debugger")
	} else if b, l := lossNumbers(stderrLoss); b == 0 || l == 0 {
		t.Errorf("the worker's loss line lacks non-zero bytes and lines: %q", stderrLoss)
	} else {
		t.Logf("the worker's stderr: %s", stderrLoss)
	}

	thaw()
	// serve, thawed, reads the report of the loss and tells the IDE.
	deadline := time.Now().Add(30 * time.Second)
	var serveLoss, ideLoss []string
	for time.Now().Before(deadline) {
		serveLoss = lossRE.FindAllString(p.Log(), -1)
		ideLoss = out.lossLines()
		if len(serveLoss) > 0 && len(ideLoss) > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// What the worker's connection still held when serve froze reaches
	// serve now; once serve has read it to its end, the IDE has all it
	// will get.
	detached := regexp.MustCompile(`(?m)^.* executor detached .*pid=` + strconv.Itoa(w.pid) + `\b.*$`)
	for deadline := time.Now().Add(60 * time.Second); !detached.MatchString(p.Log()); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("serve has not seen the worker's debugger connection end 60 s after it was thawed")
		}
	}
	t.Logf("serve: %s", detached.FindString(p.Log()))
	// serve may still be relaying what it read last (a race build relays
	// a few MB/s): the IDE has all it will get once nothing more came for
	// two seconds.
	for deadline, n, since := time.Now().Add(60*time.Second), -1, time.Now(); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, events, _, _, _ := out.snapshot()
		if events != n {
			n, since = events, time.Now()
		} else if time.Since(since) >= 2*time.Second {
			break
		}
	}
	seqs, events, bytes, _, _ := out.snapshot()
	sum := summarize(seqs, bigOutputLines)
	t.Logf("the IDE got %d output events, %d bytes; %v", events, bytes, sum)
	// What the report counts and what arrived make up the task's output:
	// the report leaves out no line that never arrived, and counts none
	// that did (one more: the worker's in-stream note of what it dropped,
	// lost with the rest).
	if _, lostLines := lossNumbers(stderrLoss); stderrLoss != "" && int64(sum.distinct)+lostLines < bigOutputLines {
		t.Errorf("the worker reports %d lines lost and the IDE got %d, of %d printed: %d lines missing at the IDE are in no report",
			lostLines, sum.distinct, bigOutputLines, int64(sum.missing)-lostLines)
	} else if stderrLoss != "" && int64(sum.distinct)+lostLines > bigOutputLines+1 {
		t.Errorf("the worker reports %d lines lost but the IDE got %d, of %d printed: it counts %d lines that arrived",
			lostLines, sum.distinct, bigOutputLines, int64(sum.distinct)+lostLines-bigOutputLines-1)
	}
	if len(serveLoss) == 0 {
		t.Errorf("serve's log has no line saying the worker's output did not reach the debugger (the LOST report)")
	} else {
		t.Logf("serve's log: %q", serveLoss)
		warned, counted := false, false
		for _, l := range serveLoss {
			warned = warned || strings.Contains(l, " WRN ")
			b, n := lossNumbers(l)
			counted = counted || (b > 0 && n > 0)
		}
		if !warned {
			t.Errorf("serve logs the loss, but not at Warn")
		}
		if !counted {
			t.Errorf("serve's loss lines lack non-zero bytes and lines")
		}
	}
	if len(ideLoss) == 0 {
		t.Errorf("the IDE's console never said the worker's output did not reach the debugger")
	} else {
		t.Logf("the IDE's output: %q", ideLoss)
		if !strings.HasPrefix(ideLoss[0], "console: ") {
			t.Errorf("the IDE got the loss report in an output event of another category than console: %q", ideLoss[0])
		}
		if b, l := lossNumbers(ideLoss[0]); b == 0 || l == 0 {
			t.Errorf("the IDE's loss line lacks non-zero bytes and lines: %q", ideLoss[0])
		}
	}
}
