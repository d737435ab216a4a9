package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/shellquote"
	"github.com/sparkdap/sparkdap/internal/syncbuf"
)

// TestServeSaysTheGeneratedTokenForTheLocalShell: serve without a token
// prints the one it generated as a command the user's own shell runs to
// set it (PowerShell on Windows), with the very token the executors need.
func TestServeSaysTheGeneratedTokenForTheLocalShell(t *testing.T) {
	for _, tc := range []struct {
		shell shellquote.Dialect
		want  func(token string) string
	}{
		{shellquote.POSIX, func(tok string) string { return "export SPARKDAP_TOKEN=" + tok }},
		{shellquote.PowerShell, func(tok string) string { return "$env:SPARKDAP_TOKEN = '" + tok + "'" }},
	} {
		t.Run(tc.shell.String(), func(t *testing.T) {
			withLocalShell(t, tc.shell)
			t.Setenv(tokenEnv, "")
			t.Setenv(ideTokenEnv, "")
			dir := t.TempDir()
			ready := filepath.Join(dir, "ready.json")
			c, f := serveCmd(&syncbuf.Buffer{})
			if err := parseFlags(c.fs, []string{"--ide", "127.0.0.1:0", "--executors", "127.0.0.1:0",
				"--ready-file", ready, "--live", "off", "--no-path-mapping",
				"--control", filepath.Join(dir, "ctl.sock")}); err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithTimeout(context.Background(), time.Minute)
			defer stop()
			var stderr syncbuf.Buffer
			served := make(chan error, 1)
			go func() { served <- serveUntil(ctx, f, c.fs.Args(), &stderr) }()
			var got struct{ Token string }
			for got.Token == "" {
				if b, err := os.ReadFile(ready); err == nil {
					_ = json.Unmarshal(b, &got)
				}
				select {
				case err := <-served:
					t.Fatalf("serve ended before it was ready: %v; stderr: %s", err, stderr.String())
				case <-ctx.Done():
					t.Fatal("serve never became ready")
				case <-time.After(20 * time.Millisecond):
				}
			}
			stop()
			<-served
			if want := tc.want(got.Token); !strings.Contains(stderr.String(), "generated one for this run: "+want+"\n") {
				t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
			}
		})
	}
}
