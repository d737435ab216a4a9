//go:build linux

package integration

import (
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/pycharm"
	"github.com/sparkdap/sparkdap/testkit/pycharmtest"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// pycharmOutputLines is what TestPyCharmTaskOutputArrivesWhole's task
// prints: 8 MB of big_output.py's 80-byte lines.
const pycharmOutputLines = 100_000

// javaURLDecode decodes s as java.net.URLDecoder.decode(s, "UTF-8") does,
// which PyCharm applies to a message's payload and again to an <io>'s s
// attribute: "+" is a space, %XX a byte; a "%" not followed by two hex
// digits is an error (URLDecoder throws IllegalArgumentException).
func javaURLDecode(s string) (string, error) {
	if !strings.ContainsAny(s, "%+") {
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '+':
			b = append(b, ' ')
		case '%':
			if i+2 >= len(s) {
				return "", fmt.Errorf("incomplete trailing escape (%%) pattern at %d", i)
			}
			v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return "", fmt.Errorf("illegal hex characters in escape (%%) pattern %q", s[i:i+3])
			}
			b = append(b, byte(v))
			i += 2
		default:
			b = append(b, c)
		}
	}
	return string(b), nil
}

// parsePyCharmIO reads a CMD_WRITE_TO_CONSOLE (116) payload as PyCharm's
// RemoteDebugger does: ProtocolFrame URL-decodes and trims the payload,
// ProtocolParser.parseIo moves to the first child, which must be <io>,
// and URL-decodes its s attribute (default "") once more; ctx (default 1)
// picks the console stream, 1 stdout, anything else stderr.
func parsePyCharmIO(payload string) (text string, stderr bool, err error) {
	decoded, err := javaURLDecode(payload)
	if err != nil {
		return "", false, fmt.Errorf("payload: %w", err)
	}
	d := xml.NewDecoder(strings.NewReader(strings.TrimSpace(decoded)))
	depth := 0
	for {
		tok, err := d.Token()
		if err != nil {
			return "", false, fmt.Errorf("no <io> in %.200q: %w", decoded, err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			if _, end := tok.(xml.EndElement); end {
				depth--
			}
			continue
		}
		depth++
		if depth == 1 {
			continue // the root, <xml>
		}
		if se.Name.Local != "io" {
			return "", false, fmt.Errorf("expected <io>, found <%s>", se.Name.Local)
		}
		s, ctx := "", "1"
		for _, a := range se.Attr {
			switch a.Name.Local {
			case "s":
				s = a.Value
			case "ctx":
				ctx = a.Value
			}
		}
		text, err := javaURLDecode(s)
		if err != nil {
			return "", false, fmt.Errorf("s attribute: %w", err)
		}
		n, err := strconv.Atoi(ctx)
		if err != nil {
			return "", false, fmt.Errorf("ctx %q: %w", ctx, err)
		}
		return text, n != 1, nil
	}
}

// pycharmOutput follows the console output the PyCharm double receives
// and reads big_output.py's numbered lines out of it (ideOutput's work,
// categories "stdout" and "stderr").
type pycharmOutput struct {
	*ideOutput
	mu        sync.Mutex
	messages  int
	maxText   int      // the longest text one message carried
	ellipsis  int      // messages whose text ends in "..." (pydevd-pycharm's cut)
	anomalies []string // what PyCharm could not parse (first few)
}

// followPyCharmOutput consumes ide's CMD_WRITE_TO_CONSOLE messages as
// they come, until ctx ends or the connection closes. Nothing else may
// wait on ide's messages meanwhile.
func followPyCharmOutput(ctx context.Context, ide *pycharmtest.Server) *pycharmOutput {
	o := &pycharmOutput{ideOutput: &ideOutput{partial: map[string]string{}}}
	go func() {
		for {
			m, err := ide.WaitFor(ctx, func(m pycharm.Message) bool { return m.ID == pycharm.CmdWriteToConsole })
			if err != nil {
				return
			}
			text, stderr, err := parsePyCharmIO(m.Payload)
			o.mu.Lock()
			o.messages++
			if err != nil {
				if len(o.anomalies) < 5 {
					o.anomalies = append(o.anomalies, err.Error())
				}
				o.mu.Unlock()
				continue
			}
			o.maxText = max(o.maxText, len(text))
			if strings.HasSuffix(text, "...") {
				o.ellipsis++
			}
			o.mu.Unlock()
			category := "stdout"
			if stderr {
				category = "stderr"
			}
			o.add(category, text)
		}
	}()
	return o
}

// TestPyCharmTaskOutputArrivesWhole: TestSparkTaskOutputArrivesWhole
// through the PyCharm front end. One debugged task of a real local Spark
// job (pydevd-pycharm, `sparkdap submit --ide-kind pycharm`) prints 8 MB
// (100,000 numbered lines of 80 bytes) and the job ends right after it.
// PyCharm (the double, reading CMD_WRITE_TO_CONSOLE as PyCharm does) gets
// every line, in order, once each, none cut to pydevd-pycharm's
// 1,000 characters plus "...", and serve's log shows no connection cut in
// the middle of a message.
func TestPyCharmTaskOutputArrivesWhole(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	py := requirePyCharmSpark(t)
	ctx := testContext(t, 5*time.Minute)
	bin := sparkdapBinary(t)
	const lines = pycharmOutputLines

	ide, err := pycharmtest.Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ide.Close)
	var others []string // what reached PyCharm other than console output (first few)
	var othersMu sync.Mutex
	ide.Log = func(dir string, m pycharm.Message) {
		if m.ID == pycharm.CmdWriteToConsole {
			return
		}
		othersMu.Lock()
		defer othersMu.Unlock()
		if len(others) < 40 {
			others = append(others, fmt.Sprintf("%s %.300s", dir, m))
		}
	}

	dir := t.TempDir()
	serveErr := &syncbuf.Buffer{}
	serve := exec.CommandContext(ctx, bin, "serve", "--ide-kind", "pycharm", "--pycharm", ide.Addr(),
		"--executors", "127.0.0.1:0", "--token", testToken, "--root", dir, "--log-level", "debug")
	serve.Stderr = serveErr
	serve.WaitDelay = 5 * time.Second
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = serve.Process.Signal(os.Interrupt)
		_ = serve.Wait()
		if strings.Contains(serveErr.String(), "WARNING: DATA RACE") {
			t.Errorf("the race detector caught a data race in sparkdap serve")
		}
		if t.Failed() {
			t.Logf("sparkdap serve log (last 16 KiB):\n%s", tail(serveErr.String(), 16<<10))
			othersMu.Lock()
			t.Logf("PyCharm's messages other than console output: %q", others)
			othersMu.Unlock()
		}
	})
	var executors string
	for deadline := time.Now().Add(30 * time.Second); executors == ""; time.Sleep(50 * time.Millisecond) {
		if m := executorPortRE.FindStringSubmatch(serveErr.String()); m != nil {
			executors = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("serve did not report its executor port:\n%s", serveErr.String())
		}
	}

	script := filepath.Join(dir, "big_output.py")
	copyFile(t, bigOutputScript(t), script)
	result := filepath.Join(dir, "out.json")
	job := startSpark(t, ctx, dir, []string{"SPARKDAP_TOKEN=" + testToken}, bin,
		"submit", "--ide-kind", "pycharm", "--proxy", executors, "--partitions", "0", "--",
		"--master", "local[2]", "--conf", "spark.ui.enabled=false", "--conf", "spark.pyspark.python="+py,
		script, "job", result, strconv.Itoa(lines))

	// PyCharm's side: the proxy connects when the worker is admitted;
	// the double does PyCharm's handshake (no breakpoints), then reads the
	// console.
	acceptCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := ide.Accept(acceptCtx); err != nil {
		t.Fatalf("the proxy never connected to the PyCharm double: %v", err)
	}
	startCtx, cancelStart := context.WithTimeout(ctx, time.Minute)
	defer cancelStart()
	version, err := ide.Start(startCtx)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	t.Logf("pydevd version through the proxy: %q", version)
	out := followPyCharmOutput(ctx, ide)

	select {
	case <-job.done:
	case <-ctx.Done():
		t.Fatalf("the job did not end: %v", ctx.Err())
	}
	if job.err != nil {
		t.Fatalf("the job failed: %v", job.err)
	}
	ended := time.Now()
	if got := readJSON(t, result)["count"]; got != float64(8) {
		t.Errorf("count = %v, want 8", got)
	}
	t.Logf("the job ran %v", job.elapsed.Round(100*time.Millisecond))

	// Wait for the last line, or for the output to stop coming.
	out.waitEnd(lines, ended)
	seqs, events, bytes, first, last := out.snapshot()
	s := summarize(seqs, lines)
	serveLog := serveErr.String()
	attached := regexp.MustCompile(`(?m)^.*attached \(.*$`).FindAllString(serveLog, -1)
	out.mu.Lock()
	messages, maxText, ellipsis, anomalies := out.messages, out.maxText, out.ellipsis, out.anomalies
	out.mu.Unlock()
	if messages == 0 {
		t.Logf("no CMD_WRITE_TO_CONSOLE message reached PyCharm (%d bytes printed); %d debugged worker(s): %q",
			lines*bigOutputLineWidth, len(attached), attached)
	} else {
		t.Logf("%d CMD_WRITE_TO_CONSOLE messages (%d parsed, the longest text %d characters), %d bytes of console text at PyCharm (%d bytes printed), the first %v after the job started, the last %v after it ended (%v after the first: %.1f MB/s); %d debugged worker(s): %q",
			messages, events, maxText, bytes, lines*bigOutputLineWidth, first.Sub(job.started).Round(time.Millisecond),
			last.Sub(ended).Round(time.Millisecond), last.Sub(first).Round(time.Millisecond),
			float64(bytes)/1e6/max(last.Sub(first).Seconds(), 1e-3), len(attached), attached)
	}
	t.Logf("at PyCharm: %v", s)
	out.ideOutput.mu.Lock()
	notes, bad := out.notes, out.bad
	out.ideOutput.mu.Unlock()
	if len(notes) > 0 {
		t.Logf("other sparkdap lines at PyCharm: %q", notes)
	}
	if lost := out.lossLines(); len(lost) > 0 {
		t.Logf("PyCharm was told of lost output: %q", lost)
	}
	if messages == 0 {
		t.Errorf("none of the task's output reached PyCharm's console: is the worker's pydevd-pycharm told to send it (settrace's stdout_to_server, stderr_to_server)?")
	}
	if len(anomalies) > 0 {
		t.Errorf("PyCharm could not parse %d console messages: %q", len(anomalies), anomalies)
	}
	if ellipsis > 0 {
		t.Errorf("%d console messages end in \"...\": pydevd-pycharm cut them to its MAX_IO_MSG_SIZE", ellipsis)
	}
	if len(attached) != 1 {
		t.Errorf("%d debug sessions, want 1 (partition 0's)", len(attached))
	}
	if len(bad) > 0 {
		t.Errorf("numbered lines arrived cut or garbled: %q", bad)
	}
	if s.missing > 0 || s.dups > 0 || s.outOfOrder > 0 {
		t.Errorf("PyCharm did not get the task's %d lines whole, in order, once each: %v", lines, s)
	}
	if s.maxSeq != lines-1 {
		t.Errorf("the last line (%d) never reached PyCharm; the last that did: %d", lines-1, s.maxSeq)
	}
	if cut := cutMidMessage.FindAllString(serveLog, 5); len(cut) > 0 {
		t.Errorf("serve's log shows a connection cut in the middle of a message:\n%s", strings.Join(cut, "\n"))
	}
	if a := ide.Anomalies(); len(a) > 0 {
		t.Errorf("PyCharm would log: %q", a)
	}
	if st := ide.Strays(); len(st) > 0 {
		t.Errorf("PyCharm would drop: %v", st)
	}
	if ide.Dropped() {
		t.Errorf("PyCharm dropped the session (CMD_EXIT reached it)")
	}
}

// TestParsePyCharmIO checks the parser above against pydevd's
// make_io_message layout (quote(v, '/>_= ') inside the attribute, the
// whole payload quoted again on the wire).
func TestParsePyCharmIO(t *testing.T) {
	for _, c := range []struct {
		payload, text string
		stderr        bool
		err           bool
	}{
		{`<xml><io s="a b%0A" ctx="1"/></xml>`, "a b\n", false, false},
		{`%3Cxml%3E%3Cio s%3D%22a%2520b%250A%22 ctx%3D%222%22/%3E%3C/xml%3E`, "a b\n", true, false},
		{`<xml><io s="x%252By+z"/></xml>`, "x+y z", false, false},
		{`<xml><thread id="1"/></xml>`, "", false, true},
		{`<xml><io s="50%"/></xml>`, "", false, true},
	} {
		text, stderr, err := parsePyCharmIO(c.payload)
		if (err != nil) != c.err || text != c.text || stderr != c.stderr {
			t.Errorf("parsePyCharmIO(%q) = %q, %v, %v; want %q, %v, error %v", c.payload, text, stderr, err, c.text, c.stderr, c.err)
		}
	}
}
