package pathmap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var projectFiles = []string{
	"/home/me/proj/app.py",
	"/home/me/proj/jobs/utils.py",
	"/home/me/proj/jobs/__init__.py",
	"/home/me/proj/lib/loans/calc.py",
	"/home/me/proj/tools/utils.py", // a second utils.py: suffix matching must not guess
	"/home/me/proj/a/x/common.py",
	"/home/me/proj/b/x/common.py",
}

var windowsFiles = []string{
	`C:\Users\me\proj\app.py`,
	`C:\Users\me\proj\jobs\utils.py`,
	`C:\Users\me\proj\lib\loans\calc.py`,
}

func mustRule(t *testing.T, s string) Rule {
	t.Helper()
	r, err := ParseRule(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestToLocal(t *testing.T) {
	executor := Roots{
		SparkFiles: "/tmp/spark-1a2b/userFiles-0c9d8e7f-1111-2222-3333-444455556666",
		Cwd:        "/data/yarn/usercache/me/appcache/application_1_0001/container_1_0001_01_000002",
		DriverDir:  "/opt/jobs/run",
		SysPath: []string{"/usr/lib/python3.11", "./deps.zip",
			"/tmp/spark-1a2b/userFiles-0c9d8e7f-1111-2222-3333-444455556666/loans.zip"},
	}
	tests := []struct {
		name    string
		windows bool
		rules   []string
		remote  string
		want    string
		wantErr error
	}{
		{name: "same machine", remote: "/home/me/proj/jobs/utils.py", want: "/home/me/proj/jobs/utils.py"},
		{name: "SparkFiles copy of a --py-files module under a package dir",
			remote: executor.SparkFiles + "/jobs/utils.py", want: "/home/me/proj/jobs/utils.py"},
		{name: "flat SparkFiles copy with a unique name", remote: executor.SparkFiles + "/calc.py",
			want: "/home/me/proj/lib/loans/calc.py"},
		{name: "flat copy of a name that is not unique", remote: executor.SparkFiles + "/utils.py", wantErr: ErrAmbiguous},
		{name: "inside a shipped zip (absolute, local mode)", remote: executor.SparkFiles + "/loans.zip/lib/loans/calc.py",
			want: "/home/me/proj/lib/loans/calc.py"},
		{name: "inside a shipped zip (relative, real executors)", remote: "./deps.zip/jobs/utils.py",
			want: "/home/me/proj/jobs/utils.py"},
		{name: "YARN container dir", remote: executor.Cwd + "/__pyfiles__/jobs/utils.py", want: "/home/me/proj/jobs/utils.py"},
		{name: "driver's __main__ pickled into a closure", remote: "/opt/jobs/run/app.py", want: "/home/me/proj/app.py"},
		{name: "equally good matches are ambiguous", remote: "/srv/x/common.py", wantErr: ErrAmbiguous},
		{name: "a longer suffix breaks the tie", remote: "/srv/a/x/common.py", want: "/home/me/proj/a/x/common.py"},
		{name: "no such file", remote: "/srv/nothing.py", wantErr: ErrUnmapped},
		{name: "explicit rule wins", rules: []string{"/opt/jobs/run=/home/me/elsewhere"}, remote: "/opt/jobs/run/app.py",
			want: "/home/me/elsewhere/app.py"},
		{name: "regex rule for generated dirs", rules: []string{`/tmp/spark-[0-9a-f]+/userFiles-[0-9a-f-]+=/home/me/proj/jobs`},
			remote: executor.SparkFiles + "/utils.py", want: "/home/me/proj/jobs/utils.py"},
		{name: "Windows client, Linux executor", windows: true, remote: executor.SparkFiles + "/jobs/utils.py",
			want: `C:\Users\me\proj\jobs\utils.py`},
		{name: "Windows client, case differs", windows: true, remote: "/opt/jobs/run/LIB/Loans/calc.py",
			want: `C:\Users\me\proj\lib\loans\calc.py`},
		{name: "Windows client with an explicit rule", windows: true, rules: []string{`/opt/jobs/run=C:\src`},
			remote: "/opt/jobs/run/pkg/mod.py", want: `C:\src\pkg\mod.py`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rules []Rule
			for _, r := range tt.rules {
				rules = append(rules, mustRule(t, r))
			}
			files, root := projectFiles, "/home/me/proj"
			if tt.windows {
				files, root = windowsFiles, `C:\Users\me\proj`
			}
			pm := NewForFiles(root, tt.windows, files, rules)
			got, err := pm.ToLocal(tt.remote, executor)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ToLocal(%s) = %+v, %v; want error %v", tt.remote, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got.Local != tt.want {
				t.Fatalf("ToLocal(%s) = %+v, %v; want %s", tt.remote, got, err, tt.want)
			}
			if got.Rule == "" {
				t.Error("mapping does not say which rule applied")
			}
		})
	}
}

func TestAmbiguityNamesTheCandidates(t *testing.T) {
	pm := NewForFiles("/home/me/proj", false, projectFiles, nil)
	_, err := pm.ToLocal("/tmp/userFiles-1/utils.py", Roots{})
	if err == nil || !strings.Contains(err.Error(), "/home/me/proj/jobs/utils.py") || !strings.Contains(err.Error(), "/home/me/proj/tools/utils.py") {
		t.Fatalf("err = %v; want both candidates named", err)
	}
}

func TestToRemote(t *testing.T) {
	roots := Roots{SparkFiles: "/tmp/spark-1/userFiles-2", Cwd: "/work", DriverDir: "/opt/run",
		CodeDirs: []string{"/opt/run", "/home/client2/nb"},
		SysPath:  []string{"/usr/lib/python3.11/site-packages", "/work/deps.zip"}}
	tests := []struct {
		name    string
		windows bool
		root    string
		rules   []string
		local   string
		want    []string // must all be among the candidates
		notWant []string
	}{
		{name: "package module", root: "/home/me/proj", local: "/home/me/proj/jobs/utils.py",
			want: []string{"/home/me/proj/jobs/utils.py", "/tmp/spark-1/userFiles-2/jobs/utils.py",
				"/tmp/spark-1/userFiles-2/utils.py", "/work/deps.zip/jobs/utils.py", "/opt/run/jobs/utils.py"},
			notWant: []string{"/usr/lib/python3.11/site-packages/utils.py"}},
		{name: "main script", root: "/home/me/proj", local: "/home/me/proj/app.py", want: []string{"/opt/run/app.py"}},
		{name: "closure from another client's directory", root: "/home/me/proj", local: "/home/me/proj/app.py",
			want: []string{"/home/client2/nb/app.py"}},
		{name: "literal rule reversed", root: "/home/me/proj", rules: []string{"/srv/code=/home/me/proj"},
			local: "/home/me/proj/jobs/utils.py", want: []string{"/srv/code/jobs/utils.py"}},
		{name: "Windows path", windows: true, root: `C:\Users\me\proj`, local: `C:\Users\me\proj\jobs\utils.py`,
			want:    []string{"/tmp/spark-1/userFiles-2/jobs/utils.py", "/work/deps.zip/jobs/utils.py"},
			notWant: []string{`C:\Users\me\proj\jobs\utils.py`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rules []Rule
			for _, r := range tt.rules {
				rules = append(rules, mustRule(t, r))
			}
			pm := NewForFiles(tt.root, tt.windows, nil, rules)
			got := pm.ToRemote(tt.local, roots)
			set := map[string]bool{}
			for _, g := range got {
				set[g] = true
			}
			for _, w := range tt.want {
				if !set[w] {
					t.Errorf("candidates for %s lack %s: %v", tt.local, w, got)
				}
			}
			for _, w := range tt.notWant {
				if set[w] {
					t.Errorf("candidates for %s include %s", tt.local, w)
				}
			}
			if len(got) > maxCandidates {
				t.Errorf("%d candidates, limit %d", len(got), maxCandidates)
			}
		})
	}
}

func TestParseMapRule(t *testing.T) {
	for _, bad := range []string{"", "=x", "x=", "noequals", "/tmp/[unclosed=/x"} {
		if _, err := ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q) accepted", bad)
		}
	}
	r := mustRule(t, "/tmp/deps.zip=/src")
	if !r.Remote.MatchString("/tmp/deps.zip/x.py") || r.Remote.MatchString("/tmp/depsXzip/x.py") {
		t.Error("a dot in a literal prefix must match only a dot")
	}
}

func TestPathMapperReadsTheLocalTree(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"jobs/utils.py", ".venv/lib/utils2.py", "node_modules/x.py"} {
		p := filepath.Join(root, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("x = 1\n"), 0o644)
	}
	pm, err := New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pm.ToLocal("/tmp/userFiles-9/utils.py", Roots{})
	if err != nil || got.Local != filepath.Join(root, "jobs/utils.py") {
		t.Fatalf("ToLocal = %+v, %v", got, err)
	}
	if _, err := pm.ToLocal("/x/utils2.py", Roots{}); !errors.Is(err, ErrUnmapped) {
		t.Fatalf("a file in .venv was indexed: %v", err)
	}
}

// FuzzPathMapper throws arbitrary paths at both directions: no panics, and
// a successful remote → local answer is always one of the local files.
func FuzzPathMapper(f *testing.F) {
	f.Add("/tmp/spark-1/userFiles-2/jobs/utils.py", "/home/me/proj/jobs/utils.py", false)
	f.Add("./deps.zip/../../x.py", `C:\Users\me\proj\app.py`, true)
	f.Add("", "", false)
	f.Fuzz(func(t *testing.T, remote, local string, windows bool) {
		files, root := projectFiles, "/home/me/proj"
		if windows {
			files, root = windowsFiles, `C:\Users\me\proj`
		}
		pm := NewForFiles(root, windows, files, nil)
		roots := Roots{SparkFiles: "/tmp/spark-1/userFiles-2", Cwd: "/work", SysPath: []string{"./deps.zip"}}
		if m, err := pm.ToLocal(remote, roots); err == nil {
			found := false
			for _, f := range files {
				found = found || f == m.Local
			}
			if !found {
				t.Fatalf("ToLocal(%q) = %q, not a local file", remote, m.Local)
			}
		}
		if n := len(pm.ToRemote(local, roots)); n > maxCandidates {
			t.Fatalf("%d candidates", n)
		}
	})
}

// TestToRemoteWindowsIDEPaths: IDEs on Windows send a file's path in
// their own spelling, PyCharm lower-cased with /, VS Code with a
// lower-case drive letter and \. The executor paths are built from the
// file's real spelling, which is what a Linux executor has.
func TestToRemoteWindowsIDEPaths(t *testing.T) {
	files := []string{`C:\Users\Me\Proj\Jobs\LoanCalc.py`, `C:\Users\Me\Proj\Lib\Loans\Calc.py`, `C:\Users\Me\Proj\app.py`}
	roots := Roots{Cwd: "/opt/run", SysPath: []string{"/opt/run/deps.zip"}}
	tests := []struct {
		name    string
		rules   []string
		local   string
		want    []string
		notWant []string
	}{
		{name: "PyCharm: lower-cased, forward slashes", local: "c:/users/me/proj/jobs/loancalc.py",
			want:    []string{"/opt/run/Jobs/LoanCalc.py", "/opt/run/deps.zip/Jobs/LoanCalc.py", "/opt/run/LoanCalc.py"},
			notWant: []string{"/opt/run/jobs/loancalc.py", "/opt/run/loancalc.py"}},
		{name: "VS Code: lower-case drive, backslashes", local: `c:\Users\Me\Proj\Jobs\LoanCalc.py`,
			want: []string{"/opt/run/Jobs/LoanCalc.py"}},
		{name: "VS Code: the file system's spelling", local: `C:\Users\Me\Proj\Lib\Loans\Calc.py`,
			want: []string{"/opt/run/Lib/Loans/Calc.py", "/opt/run/deps.zip/Lib/Loans/Calc.py"}},
		{name: "PyCharm with a --map rule", rules: []string{"/srv/job=C:/Users/Me/Proj"}, local: "c:/users/me/proj/lib/loans/calc.py",
			want: []string{"/srv/job/Lib/Loans/Calc.py", "/opt/run/Lib/Loans/Calc.py"}, notWant: []string{"/srv/job/lib/loans/calc.py"}},
		{name: "PyCharm: mixed separators", local: `c:\users/me\proj/JOBS/loancalc.PY`,
			want: []string{"/opt/run/Jobs/LoanCalc.py"}},
		{name: "a file the index does not have keeps its spelling", local: "c:/users/me/proj/jobs/new_job.py",
			want: []string{"/opt/run/jobs/new_job.py"}},
		{name: "same name, other directory: not that file's spelling", local: "c:/users/me/other/jobs/loancalc.py",
			want: []string{"/opt/run/loancalc.py"}, notWant: []string{"/opt/run/LoanCalc.py"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rules []Rule
			for _, r := range tt.rules {
				rules = append(rules, mustRule(t, r))
			}
			pm := NewForFiles(`C:\Users\Me\Proj`, true, files, rules)
			got := pm.ToRemote(tt.local, roots)
			set := map[string]bool{}
			for _, g := range got {
				set[g] = true
			}
			for _, w := range tt.want {
				if !set[w] {
					t.Errorf("candidates for %s lack %s: %v", tt.local, w, got)
				}
			}
			for _, w := range tt.notWant {
				if set[w] {
					t.Errorf("candidates for %s include %s: %v", tt.local, w, got)
				}
			}
		})
	}
}

// The local tree is read when the Mapper is made, never by a lookup (front
// ends look paths up under their locks); a file added later is found once
// a miss has had the tree read again in the background.
func TestLookupsNeverReadTheTree(t *testing.T) {
	root := t.TempDir()
	for i := range 300 {
		p := filepath.Join(root, fmt.Sprintf("pkg%d", i%30), fmt.Sprintf("mod%d.py", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x = 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pm, err := New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := pm.walks.Load(); n != 1 {
		t.Fatalf("New read the tree %d times, want 1", n)
	}
	// Lookups, hits and misses: answered from the index, the tree not read
	// on the caller's goroutine (a miss may start one background walk).
	pm.mu.Lock()
	pm.nextWalk = time.Now().Add(time.Hour)
	pm.mu.Unlock()
	for i := range 300 {
		if _, err := pm.ToLocal(fmt.Sprintf("/tmp/userFiles-1/pkg%d/mod%d.py", i%30, i), Roots{}); err != nil {
			t.Fatal(err)
		}
		_, _ = pm.ToLocal(fmt.Sprintf("/usr/lib/python3/x%d.py", i), Roots{})
	}
	if n := pm.walks.Load(); n != 1 {
		t.Fatalf("lookups read the tree: %d walks", n)
	}

	// A file added after New: missed once, then found after the
	// background walk that miss started.
	added := filepath.Join(root, "late", "added.py")
	if err := os.MkdirAll(filepath.Dir(added), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(added, []byte("y = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pm.mu.Lock()
	pm.nextWalk = time.Time{}
	pm.mu.Unlock()
	if _, err := pm.ToLocal("/tmp/userFiles-1/late/added.py", Roots{}); !errors.Is(err, ErrUnmapped) {
		t.Fatalf("first lookup of a new file: %v, want ErrUnmapped (answered from the old index)", err)
	}
	var got Mapping
	for i := 0; ; i++ {
		if got, err = pm.ToLocal("/tmp/userFiles-1/late/added.py", Roots{}); err == nil {
			break
		}
		if i == 2000 {
			t.Fatalf("the new file was never found: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got.Local != added {
		t.Fatalf("mapped to %q, want %q", got.Local, added)
	}
}
