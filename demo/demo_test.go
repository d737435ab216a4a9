package demo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/internal/breakmark"
)

// The embedded example is what an installed sparkdap runs: it must carry
// both files and the marks the tour sets its breakpoints on.
func TestWriteExampleCarriesTheBreakpointMarks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "loans")
	if err := writeExample(dir); err != nil {
		t.Fatal(err)
	}
	for file, mark := range map[string]string{"loans.py": "udf-body", "loanlib.py": "loanlib-payment"} {
		if _, err := breakmark.Line(filepath.Join(dir, file), mark); err != nil {
			t.Errorf("%s: %v", file, err)
		}
	}
}

func TestCheckToolsSaysWhatToInstall(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in tools are shell scripts")
	}
	bin := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(bin, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lacking := write("python-lacking", `echo "pandas pyarrow"`)
	complete := write("python-complete", `echo ""`)

	t.Setenv("PATH", bin)
	err := checkTools(context.Background(), complete)
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "no spark-submit on PATH (pip install pyspark") {
		t.Fatalf("without spark-submit: %v", err)
	}

	write("spark-submit", "exit 0")
	err = checkTools(context.Background(), lacking)
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "lacks pandas, pyarrow (pip install pandas pyarrow)") {
		t.Fatalf("with a Python lacking two packages: %v", err)
	}
	if err := checkTools(context.Background(), complete); err != nil {
		t.Fatalf("with everything there: %v", err)
	}
	err = checkTools(context.Background(), filepath.Join(bin, "no-such-python"))
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "cannot run") {
		t.Fatalf("with no Python: %v", err)
	}
}

// The probe itself, against this machine's python3: a module that exists
// is not reported, one that does not is.
func TestCheckToolsProbeFindsModules(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	missing, err := missingModules(context.Background(), "/usr/bin/python3", "json", "no_such_module_sparkdap")
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 1 || missing[0] != "no_such_module_sparkdap" {
		t.Fatalf("missing = %q", missing)
	}
}

func TestPrintableStripsControlBytes(t *testing.T) {
	if got := printable("a\x1b[2Jb\tc\u009bd\xffe"); got != "a?[2Jb\tc?d?e" {
		t.Fatalf("printable = %q", got)
	}
}
