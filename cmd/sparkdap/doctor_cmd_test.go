package main

import (
	"bytes"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// TestDoctorFlagErrors: doctor's own checks live in internal/doctor; here,
// what the command adds: its arguments, and the flag named in a check that
// failed on a flag's value.
func TestDoctorFlagErrors(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"doctor", "extra"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "doctor takes only flags") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}

	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	missing := filepath.Join(t.TempDir(), "missing")
	stdout.Reset()
	code := run([]string{"doctor", "--ide", free(), "--executors", free(), "--python", missing, "--java", missing, "--ssh", "me@"}, &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(stdout.String(), "FAIL  SSH gateway me@: --ssh: ") {
		t.Errorf("a bad --ssh is not reported under its flag:\n%s", stdout.String())
	}
}
