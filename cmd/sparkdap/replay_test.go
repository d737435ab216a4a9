package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestReplayFlagsReachPython: replay hands its flags to the Python side
// (which decides what runs) and ends with that side's status. A stand-in
// interpreter prints its arguments and exits 2, as the Python side does
// when it refuses.
func TestReplayFlagsReachPython(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in interpreter is a shell script")
	}
	dir := t.TempDir()
	py := filepath.Join(dir, "python")
	// It also lists the directory of the script it was given: replay's
	// Python side is several files, all written beside it.
	if err := os.WriteFile(py, []byte("#!/bin/sh\necho ARGS \"$@\"\nls \"$(dirname \"$1\")\"\nexit 2\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	capture := filepath.Join(dir, "c.json")
	if err := os.WriteFile(capture, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flags []string
		want  string
		not   []string
	}{
		{nil, capture, []string{"--trust-captured-code", "--force", "--raw-output", "--max-memory"}},
		{[]string{"--trust-captured-code"}, capture + " --trust-captured-code", []string{"--force"}},
		{[]string{"--force", "--trust-captured-code"}, capture + " --force --trust-captured-code", nil},
		{[]string{"--raw-output"}, capture + " --raw-output", []string{"--trust-captured-code", "--max-memory"}},
		{[]string{"--max-memory", "2GiB"}, capture + " --max-memory 2147483648", nil},
		{[]string{"--max-memory", "512m"}, capture + " --max-memory 536870912", nil},
	} {
		args := append(append([]string{"replay", "--python", py}, tc.flags...), capture)
		code, out, errOut := runCLI(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want the Python side's 2 (stderr %q)", tc.flags, code, errOut)
		}
		for _, name := range []string{"sparkdap_replay.py", "sparkdap_replay_budget.py", "sparkdap_replay_columnar.py",
			"sparkdap_replay_data.py", "sparkdap_replay_source.py"} {
			if !strings.Contains(out, name+"\n") {
				t.Errorf("%v: %s was not written beside the script: %q", tc.flags, name, out)
			}
		}
		if !strings.Contains(out, tc.want) {
			t.Errorf("%v: python got %q, want %q", tc.flags, out, tc.want)
		}
		for _, n := range tc.not {
			if strings.Contains(out, n) {
				t.Errorf("%v: python got %q, which has %s", tc.flags, out, n)
			}
		}
	}
}

// TestReplayHelpSaysWhatPythonIs: the --python line reads as a sentence.
func TestReplayHelpSaysWhatPythonIs(t *testing.T) {
	_, out, errOut := runCLI(t, "replay", "-h")
	want := "the Python interpreter; the one the call is replayed in; it needs"
	if !strings.Contains(out+errOut, want) {
		t.Errorf("replay -h lacks %q:\n%s%s", want, out, errOut)
	}
}

// TestReplayMaxMemoryRefusesBadSizes: a SIZE that is no size is refused as
// the flag is parsed, before any Python runs.
func TestReplayMaxMemoryRefusesBadSizes(t *testing.T) {
	for _, bad := range []string{"0", "-1", "12XB", "lots", "", "99999999999T"} {
		code, _, errOut := runCLI(t, "replay", "--python", "/nonexistent/python", "--max-memory", bad, "c.json")
		if code == 0 || !strings.Contains(errOut, "max-memory") {
			t.Errorf("--max-memory %q: exit %d, stderr %q", bad, code, errOut)
		}
	}
	var s sizeValue
	for in, want := range map[string]int64{"1": 1, "64MiB": 64 << 20, "2GiB": 2 << 30, "2G": 2 << 30, "3kb": 3 << 10, "5 MB": 5 << 20, "7B": 7} {
		if err := s.Set(in); err != nil || int64(s) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, int64(s), err, want)
		}
	}
}
