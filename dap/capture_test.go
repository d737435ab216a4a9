package dap

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/pathmap"
)

func TestSplitCapture(t *testing.T) {
	payload := []byte("DATAcode")
	for _, tc := range []struct {
		name       string
		dataBytes  any
		data, code string
		err        bool
	}{
		{"both", float64(4), "DATA", "code", false},
		{"no code", float64(8), "DATAcode", "", false},
		{"no data", float64(0), "", "DATAcode", false},
		{"past the end", float64(9), "", "", true},
		{"negative", float64(-1), "", "", true},
		{"missing", nil, "", "", true},
		{"not an integer", 2.5, "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, code, err := splitCapture(map[string]any{"dataBytes": tc.dataBytes}, payload)
			if tc.err {
				if !errors.Is(err, ErrCapture) {
					t.Fatalf("err %v, want ErrCapture", err)
				}
				return
			}
			if err != nil || string(data) != tc.data || string(code) != tc.code {
				t.Fatalf("got %q %q %v, want %q %q", data, code, err, tc.data, tc.code)
			}
		})
	}
}

// TestCaptureLocalFileOnlyFromMapping: the file replay compiles comes from
// path mapping alone. An executor naming a file that exists on this
// machine outside --root (it could name any) gets no localFile; one under
// --root (local mode: the executor's path is the local path) maps to
// itself.
func TestCaptureLocalFileOnlyFromMapping(t *testing.T) {
	root := t.TempDir()
	job := filepath.Join(root, "job.py")
	if err := os.WriteFile(job, []byte("def f(x):\n    return x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "evil.py")
	if err := os.WriteFile(outside, []byte("import os\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pm, err := pathmap.New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		paths  *pathmap.Mapper
		remote string
		want   string
	}{
		{"under root, local mode", pm, job, job},
		{"a file outside root", pm, outside, ""},
		{"no path mapping at all", nil, job, ""},
		{"no file", pm, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHub(Config{Token: testToken, Log: zerolog.Nop(), Paths: tc.paths})
			es := &ExecutorSession{hub: h, paths: pathmap.NewCache(tc.paths, pathmap.Roots{})}
			es.log = zerolog.Nop()
			if got := h.captureLocalFile(es, tc.remote); got != tc.want {
				t.Errorf("localFile %q, want %q", got, tc.want)
			}
		})
	}
}
