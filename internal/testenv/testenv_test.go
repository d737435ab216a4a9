package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder stands in for a test to see whether Missing skips or fails.
// Unlike a real T it returns from Skipf and Fatalf.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestMissingSkipsLocallyFailsInCI(t *testing.T) {
	for _, ci := range []string{"", "false", "true"} {
		t.Run("CI="+ci, func(t *testing.T) {
			t.Setenv("CI", ci)
			r := &recorder{TB: t}
			Missing(r, "needs %s", "tmux")
			got, other := r.skipped, r.failed
			if ci == "true" {
				got, other = r.failed, r.skipped
			}
			if !strings.Contains(got, "needs tmux") || other != "" {
				t.Errorf("skipped %q, failed %q; want only a %s naming tmux", r.skipped, r.failed,
					map[bool]string{true: "failure", false: "skip"}[ci == "true"])
			}
		})
	}
}

// A module that cannot exist is reported by name, whether or not python3
// is here at all.
func TestPythonMissingModule(t *testing.T) {
	t.Setenv("CI", "")
	r := &recorder{TB: t}
	if p := Python(r, "sparkdap_no_such_module"); p != "" {
		t.Errorf("returned %q for a missing module", p)
	}
	if !strings.Contains(r.skipped, "sparkdap_no_such_module") || r.failed != "" {
		t.Errorf("skipped %q, failed %q; want a skip naming the module", r.skipped, r.failed)
	}
}

func TestFindMarkedLine(t *testing.T) {
	const src = `def f(x):
    return x  # BREAKPOINT
def g(x):
    return x * x  # BREAKPOINT: square
def h(x):
    return x + 1  # BREAKPOINT: square-plus
# "# BREAKPOINT: square" in a comment's middle is not a mark
`
	tests := []struct {
		name, src, mark string
		want            int
		wantErr         string
	}{
		{name: "unnamed", src: src, want: 2},
		{name: "named", src: src, mark: "square", want: 4},
		{name: "a longer name with the same start", src: src, mark: "square-plus", want: 6},
		{name: "missing", src: src, mark: "cube", wantErr: `no line ends with "# BREAKPOINT: cube"`},
		{name: "twice", src: "a  # BREAKPOINT: x\nb  # BREAKPOINT: x\n", mark: "x", wantErr: "both line 1 and line 2"},
		{name: "unnamed mark absent", src: "a  # BREAKPOINT: x\n", wantErr: `no line ends with "# BREAKPOINT"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "job.py")
			if err := os.WriteFile(path, []byte(tt.src), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := FindMarkedLine(path, tt.mark)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
					t.Errorf("got %d, %v; want an error naming %s with %q", got, err, path, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}
