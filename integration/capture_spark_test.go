//go:build linux

package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestCaptureReplayOnSpark is capture-then-replay on a real local-mode Spark
// job, for each kind of executor code the driver script defines (a Python
// UDF, an RDD lambda, a mapInPandas function, a pandas UDF): the job fails
// on one value under --post-mortem → the IDE stops in the executor →
// sparkdapCapture → `sparkdap replay` raises the executor's exception →
// the developer fixes the local copy of the script → replay returns the
// fixed value → `replay --debug` stops an attached DAP client in the local
// function with the captured argument. One job and one proxy serve all
// four cases, to keep CI's Spark time down. Not named TestSpark*: one
// Spark version (the Spark 3.5 leg runs only TestSpark*) is enough in CI;
// it passes on the 3.5 venv too (PATH=$VENV/bin:$PATH go test -run ...).
func TestCaptureReplayOnSpark(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	ctx := testContext(t, 4*time.Minute)
	root := t.TempDir()
	// The developer's copy (what the IDE sees, under --root) and the copy
	// Spark runs are different files: the capture must name the local one.
	src := filepath.Join(root, "home", "dev", "capture_job.py")
	ship := filepath.Join(root, "deploy", "capture_job.py")
	copyFile(t, filepath.Join("testdata", "capture_job.py"), src)
	copyFile(t, filepath.Join("testdata", "capture_job.py"), ship)
	capDir := filepath.Join(t.TempDir(), "captures")

	cases := []struct {
		mark, function string
		// fix replaces the marked line's code in the local copy.
		broken, fixed string
		raised        string
		// returned is what replay prints after the fix, as a pattern.
		returned string
		// want: what the IDE sees in the replayed frame; a bare name is
		// read with variables, anything else evaluated.
		want map[string]string
	}{
		{
			mark: "udf", function: "parse_amount",
			broken: `return int(s) * 2`, fixed: `return int(s) * 2 if s.isdigit() else -1`,
			raised:   "raised ValueError: invalid literal for int() with base 10: 'x'",
			returned: `returned -1\n`,
			want:     map[string]string{"s": "'x'"},
		},
		{
			mark: "lambda", function: "<lambda>",
			broken: `lambda x: 100 // x)`, fixed: `lambda x: 100 // x if x else 0)`,
			raised:   "raised ZeroDivisionError: integer division or modulo by zero",
			returned: `returned 0\n`,
			want:     map[string]string{"x": "0"},
		},
		{
			mark: "mapinpandas", function: "to_cents",
			broken:   `pdf["s"].astype(int)`,
			fixed:    `pd.to_numeric(pdf["s"], errors="coerce").fillna(0).astype(int)`,
			raised:   "raised ValueError: invalid literal for int() with base 10: 'x'",
			returned: `returned \[\s+s\s+cents\s+0\s+2\s+200\s+1\s+x\s+0\]\n`,
			want:     map[string]string{`pdf["s"].tolist()`: "['2', 'x']"},
		},
		{
			mark: "pandas-udf", function: "tripled",
			broken:   `s.astype(int)`,
			fixed:    `pd.to_numeric(s, errors="coerce").fillna(0).astype(int)`,
			raised:   "raised ValueError: invalid literal for int() with base 10: 'x'",
			returned: `returned 0\s+6\s+1\s+0\s+(Name: \S+, )?dtype: int64\n`,
			want:     map[string]string{`s.tolist()`: "['2', 'x']"},
		},
	}

	p := startProxy(t, ctx, "--root", filepath.Dir(src), "--capture-dir", capDir)
	ide := dialIDE(t, ctx, p.IDE)
	attachMerged(t, ctx, ide, false)
	job := startSpark(t, ctx, filepath.Dir(ship), []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(t),
		"submit", "--proxy", p.Executors, "--post-mortem", "--partitions", "1", "--",
		"--master", "local[2]", "--conf", "spark.ui.enabled=false", ship)

	type capture struct {
		Path, Function, Task string
		Bytes                int
	}
	captures := map[string]capture{}
	for range cases {
		s := nextStop(t, ctx, ide, job)
		// The top frame of the developer's file: where the exception left
		// their code (pandas' own frames may be above it).
		frame := -1
		for i, f := range s.frames {
			if f.Source != nil && f.Source.Path == src {
				frame = i
				break
			}
		}
		if frame < 0 {
			t.Fatalf("post-mortem stop in %s with no frame of %s: %+v", s.function, src, s.frames)
		}
		var c capture
		if err := ide.Call(ctx, "sparkdapCapture", map[string]any{"frameId": s.frames[frame].Id}, &c); err != nil {
			t.Fatalf("capture at the stop in %s: %v", s.frames[frame].Name, err)
		}
		if _, dup := captures[c.Function]; dup {
			t.Fatalf("a second post-mortem stop in %s", c.Function)
		}
		captures[c.Function] = c
		if err := ide.Continue(ctx, s.threadID); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-job.done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the job did not end after the last continue")
	}
	out := job.out.String()
	for _, tc := range cases {
		// The exception's class is the Spark version's (Spark 3.5 reports
		// an RDD's failure as Py4JJavaError).
		if !strings.Contains(out, "CASE "+tc.mark+" FAILED ") {
			t.Errorf("the job did not report case %s failing, as it does without sparkdap", tc.mark)
		}
	}

	taskRE := regexp.MustCompile(`partition 1 · stage \d+`)
	for _, tc := range cases {
		t.Run(tc.mark, func(t *testing.T) {
			// Its own bound, so that one stuck case leaves the others time.
			ctx := testContext(t, 90*time.Second)
			c, ok := captures[tc.function]
			if !ok {
				t.Fatalf("no capture of %s; captured: %v", tc.function, captures)
			}
			if !taskRE.MatchString(c.Task) || filepath.Dir(c.Path) != capDir || c.Bytes == 0 {
				t.Errorf("capture answered %+v: want the task of partition 1 and a file in %s", c, capDir)
			}
			var doc struct{ LocalFile string }
			if b, err := os.ReadFile(c.Path); err != nil {
				t.Fatal(err)
			} else if err := json.Unmarshal(b, &doc); err != nil || doc.LocalFile != src {
				t.Errorf("capture file's localFile %q (%v), want the developer's %s", doc.LocalFile, err, src)
			}

			if rc, o := replay(t, ctx, c.Path); rc != 1 || !strings.Contains(o, tc.raised) {
				t.Errorf("replay before the fix: status %d, want 1 and %q; output:\n%s", rc, tc.raised, o)
			}
			line := testenv.MarkedLine(t, src, tc.mark)
			fixLine(t, src, line, tc.broken, tc.fixed)
			rc, o := replay(t, ctx, c.Path)
			if rc != 0 || !regexp.MustCompile(tc.returned).MatchString(o) {
				t.Errorf("replay after the fix: status %d, want 0 and /%s/; output:\n%s", rc, tc.returned, o)
			}
			debugReplayCheck(t, ctx, c.Path, src, line, tc.function, tc.want, tc.returned)
		})
	}
}

// fixLine replaces broken by fixed on line (1-based) of path, as the
// developer's edit would.
func fixLine(t testing.TB, path string, line int, broken, fixed string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	if !strings.Contains(lines[line-1], broken) {
		t.Fatalf("%s:%d is %q, which lacks %q", path, line, lines[line-1], broken)
	}
	lines[line-1] = strings.Replace(lines[line-1], broken, fixed, 1)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCaptureValuesOnSpark: every kind of value a PySpark function
// receives comes back equal from a capture replayed without
// --trust-captured-code. A real local-mode job hands an RDD function an
// element of scalars, nested containers, datetime and Decimal values,
// numpy arrays, a pandas DataFrame with a non-default index and a Row; a
// Python UDF a struct (a Row); mapInPandas a batch. Each raises its
// verdict and stops post-mortem; the IDE captures the stop, and replay
// runs the developer's copy of the function, which compares the decoded
// value with the expected one again: "verdict: same". No capture names a
// value it carries only pickled, and replay unpickles nothing.
func TestCaptureValuesOnSpark(t *testing.T) {
	requireSpark(t)
	ctx := testContext(t, 4*time.Minute)
	root := t.TempDir()
	src := filepath.Join(root, "home", "dev", "capture_values_job.py")
	ship := filepath.Join(root, "deploy", "capture_values_job.py")
	copyFile(t, filepath.Join("testdata", "capture_values_job.py"), src)
	copyFile(t, filepath.Join("testdata", "capture_values_job.py"), ship)
	capDir := filepath.Join(t.TempDir(), "captures")
	functions := map[string]string{"check": "rdd", "check_row": "udf", "check_batch": "mapinpandas"}

	p := startProxy(t, ctx, "--root", filepath.Dir(src), "--capture-dir", capDir)
	ide := dialIDE(t, ctx, p.IDE)
	attachMerged(t, ctx, ide, false)
	job := startSpark(t, ctx, filepath.Dir(ship), []string{"SPARKDAP_TOKEN=" + p.Token}, sparkdapBinary(t),
		"submit", "--proxy", p.Executors, "--post-mortem", "--",
		"--master", "local[1]", "--conf", "spark.ui.enabled=false", ship)

	type captured struct {
		Path, Function string
		Notes          []string
	}
	captures := map[string]captured{}
	for range functions {
		s := nextStop(t, ctx, ide, job)
		frame := -1
		for i, f := range s.frames {
			if f.Source != nil && f.Source.Path == src {
				frame = i
				break
			}
		}
		if frame < 0 {
			t.Fatalf("post-mortem stop in %s with no frame of %s: %+v", s.function, src, s.frames)
		}
		var c captured
		if err := ide.Call(ctx, "sparkdapCapture", map[string]any{"frameId": s.frames[frame].Id}, &c); err != nil {
			t.Fatalf("capture at the stop in %s: %v", s.frames[frame].Name, err)
		}
		captures[c.Function] = c
		if err := ide.Continue(ctx, s.threadID); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-job.done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the job did not end after the last continue")
	}
	for fn, mark := range functions {
		t.Run(mark, func(t *testing.T) {
			ctx := testContext(t, 90*time.Second)
			c, ok := captures[fn]
			if !ok {
				t.Fatalf("no capture of %s; captured: %v", fn, captures)
			}
			for _, n := range c.Notes {
				if strings.Contains(n, "only pickled") {
					t.Errorf("capture of %s carries a value pickled: %s", fn, n)
				}
			}
			rc, o := replay(t, ctx, c.Path)
			if rc != 1 || !strings.Contains(o, "raised ValueError: verdict: same") || strings.Contains(o, "--trust-captured-code") {
				t.Errorf("replay of %s without --trust-captured-code: status %d, want 1 and \"verdict: same\"; output:\n%s", fn, rc, o)
			}
		})
	}
}
