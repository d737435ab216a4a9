package doctor

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/shellquote"
)

// TestLocalFixesPowerShell: on Windows the fixes that run the local
// Python are commands PowerShell runs: a quoted interpreter path after the
// call operator, the requirement in single quotes, $env: for a variable.
func TestLocalFixesPowerShell(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the fake Python is a sh script")
	}
	old := localShell
	localShell = shellquote.PowerShell
	t.Cleanup(func() { localShell = old })

	// A Python without debugpy, shown under the Windows path it stands for.
	fake := filepath.Join(t.TempDir(), "python")
	script := "#!/bin/sh\nprintf 'absent\\tdebugpy\\t\\t3.11.0\\tNo module named debugpy\\n'\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	const py = `C:\Program Files\Python311\python.exe`
	d := &doctor{f: Config{Timeout: 10 * time.Second}, out: &bytes.Buffer{}}
	ctx := context.Background()
	d.checkPythonAt(ctx, "Python "+py+" (PYSPARK_PYTHON)", py, fake)
	d.checkSpark(ctx, py) // no such file here: it cannot import pyspark
	out := d.out.(*bytes.Buffer).String()
	for _, want := range []string{
		`& 'C:\Program Files\Python311\python.exe' -m pip install 'debugpy>=1.6.7,<1.9'   (on every executor too)`,
		`& 'C:\Program Files\Python311\python.exe' -m pip install pyspark (matching your cluster's Spark), or add $env:SPARK_HOME\python to PYTHONPATH`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor's output lacks %q:\n%s", want, out)
		}
	}

	// A path with no character PowerShell treats specially runs bare.
	d = &doctor{f: Config{Timeout: 10 * time.Second}, out: &bytes.Buffer{}}
	d.checkPythonAt(ctx, "Python", `C:\Python311\python.exe`, fake)
	if out, want := d.out.(*bytes.Buffer).String(), `fix: C:\Python311\python.exe -m pip install 'debugpy>=1.6.7,<1.9'`; !strings.Contains(out, want) {
		t.Errorf("doctor's output lacks %q:\n%s", want, out)
	}
}
