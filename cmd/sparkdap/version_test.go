package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/internal/buildinfo"
)

func TestVersionCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"version"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	line := strings.TrimSpace(out.String())
	if !strings.HasPrefix(line, "sparkdap "+buildinfo.Version+" (") || strings.Count(out.String(), "\n") != 1 {
		t.Errorf("version printed %q", out.String())
	}

	out.Reset()
	if code := run([]string{"version", "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errOut.String())
	}
	var got buildinfo.Info
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("--json printed %q: %v", out.String(), err)
	}
	if got != buildinfo.Read() {
		t.Errorf("--json = %+v, want %+v", got, buildinfo.Read())
	}

	errOut.Reset()
	if code := run([]string{"version", "extra"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), `unexpected arguments ["extra"]`) {
		t.Errorf("version extra: exit %d, stderr %q", code, errOut.String())
	}
}
