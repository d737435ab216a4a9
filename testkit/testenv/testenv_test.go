package testenv

import (
	"fmt"
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
