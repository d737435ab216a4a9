package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The --ready-file holds the token and usually sits in a shared directory
// like /tmp, where another user can plant files and links under names they
// can guess. Whatever is planted, the token lands only in the ready file,
// private to its owner, and nothing planted is written to.
func TestReadyFileIgnoresPlantedFiles(t *testing.T) {
	const victimText = "export PATH=$HOME/bin:$PATH\n"
	fields := map[string]string{"ide": "127.0.0.1:1", "executors": "127.0.0.1:2", "token": "9f86d081884c7d659a2feaa0c55ad015"}
	tests := []struct {
		name    string
		plant   func(t *testing.T, ready, victim string)
		wantErr bool // the ready file itself is a link: refused, not written
	}{
		{name: "nothing planted"},
		{name: "the temp name links to a victim", plant: func(t *testing.T, ready, victim string) {
			mustSymlink(t, victim, ready+".tmp")
		}},
		{name: "the temp name is a world-writable file", plant: func(t *testing.T, ready, _ string) {
			mustWrite(t, ready+".tmp", "planted")
			if err := os.Chmod(ready+".tmp", 0o666); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "the ready file links to a victim", wantErr: true, plant: func(t *testing.T, ready, victim string) {
			mustSymlink(t, victim, ready)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shared, outside := t.TempDir(), t.TempDir()
			ready := filepath.Join(shared, "ready.json")
			victim := filepath.Join(outside, "bashrc")
			mustWrite(t, victim, victimText)
			if tt.plant != nil {
				tt.plant(t, ready, victim)
			}
			before := snapshot(t, shared)

			err := writeReadyFile(ready, fields)
			if b, _ := os.ReadFile(victim); string(b) != victimText {
				t.Errorf("the victim file was written: %q", b)
			}
			after := snapshot(t, shared)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), "--ready-file") || !strings.Contains(err.Error(), "symbolic link") {
					t.Errorf("err %v; want a --ready-file error about the link", err)
				}
				if !reflect.DeepEqual(after, before) {
					t.Errorf("the directory changed:\nbefore %q\nafter  %q", before, after)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Everything planted is as it was; the ready file is new.
			delete(after, "ready.json")
			if !reflect.DeepEqual(after, before) {
				t.Errorf("planted files changed or temp files left:\nbefore %q\nafter  %q", before, after)
			}
			fi, err := os.Lstat(ready)
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
				t.Fatalf("ready file %v, %v; want a regular file, mode 0600", fi.Mode(), err)
			}
			var got map[string]string
			b, _ := os.ReadFile(ready)
			if err := json.Unmarshal(b, &got); err != nil || !reflect.DeepEqual(got, fields) {
				t.Errorf("ready file %s (%v), want %v", b, err, fields)
			}
		})
	}
}

// TestServeRefusesWeakTokens: serve does not start with a token an
// attacker can guess (an executors' token from any source, or an IDE
// token), says where it came from and how to make a good one; with
// --allow-weak-token it goes on, with a warning. wrap --embed-token and
// submit refuse to bake one the same way.
func TestServeRefusesWeakTokens(t *testing.T) {
	weakFile := filepath.Join(t.TempDir(), "tok")
	mustWrite(t, weakFile, "s3cret\n")
	const strong = "9f86d081884c7d659a2feaa0c55ad015"
	// A bad --map fails after the token checks, before serve listens.
	serve := []string{"serve", "--ide", "127.0.0.1:0", "--executors", "127.0.0.1:0", "--live", "off", "--map", "no-rule"}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string // "" : the tokens pass
	}{
		{name: "--token", args: []string{"--token", "s3cret"}, want: "--token: token too weak"},
		{name: "6 digits", args: []string{"--token", "493027"}, want: "--token: token too weak"},
		{name: "PyCharm mode", args: []string{"--ide-kind", "pycharm", "--token", "s3cret"}, want: "--token: token too weak"},
		{name: "--token-file", args: []string{"--token-file", weakFile}, want: "--token-file " + weakFile + ": token too weak"},
		{name: "$SPARKDAP_TOKEN", env: map[string]string{tokenEnv: "s3cret"}, want: "$SPARKDAP_TOKEN: token too weak"},
		{name: "--ide-token", args: []string{"--token", strong, "--ide-token", "ide"}, want: "--ide-token: token too weak"},
		{name: "$SPARKDAP_IDE_TOKEN", env: map[string]string{ideTokenEnv: "123456"}, want: "$SPARKDAP_IDE_TOKEN: token too weak"},
		{name: "strong", args: []string{"--token", strong}},
		{name: "generated"},
		{name: "allowed", args: []string{"--token", "s3cret", "--ide-token", "ide", "--allow-weak-token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tokenEnv, "")
			t.Setenv(ideTokenEnv, "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var out, errb bytes.Buffer
			code := run(append(append([]string{}, serve...), tc.args...), &out, &errb)
			if tc.want == "" {
				if code != 1 || !strings.Contains(errb.String(), "sparkdap serve: --map") || strings.Contains(errb.String(), "too weak") {
					t.Fatalf("exit %d: %s; want it past the token checks, at --map", code, errb.String())
				}
				if strings.Contains(tc.name, "allowed") && strings.Count(errb.String(), "warning: the token from") != 2 {
					t.Errorf("no warning for each weak token: %s", errb.String())
				}
				return
			}
			msg := errb.String()
			if code != 1 || !strings.Contains(msg, tc.want) || !strings.Contains(msg, "openssl rand -hex 16") ||
				!strings.Contains(msg, "secrets.token_hex(16)") || !strings.Contains(msg, "--allow-weak-token") {
				t.Fatalf("exit %d: %s; want a refusal naming %q, how to generate a token and --allow-weak-token", code, msg, tc.want)
			}
		})
	}
	t.Run("wrap and submit", func(t *testing.T) {
		t.Setenv(tokenEnv, "s3cret")
		for _, args := range [][]string{
			{"wrap", "-o", "-", "--embed-token"},
			{"submit", "-n", "--spark-submit", "/bin/true", "--", "app.py"},
		} {
			var out, errb bytes.Buffer
			if code := run(args, &out, &errb); code != 1 || !strings.Contains(errb.String(), "$SPARKDAP_TOKEN: token too weak") {
				t.Errorf("%v: exit %d, %s", args, code, errb.String())
			}
			if strings.Contains(out.String(), "s3cret") {
				t.Errorf("%v baked the weak token: %s", args, out.String())
			}
			errb.Reset()
			if code := run(append(args[:1:1], append([]string{"--allow-weak-token"}, args[1:]...)...), &out, &errb); code != 0 ||
				!strings.Contains(errb.String(), "warning: the token from $SPARKDAP_TOKEN") {
				t.Errorf("%v --allow-weak-token: exit %d, %s", args, code, errb.String())
			}
		}
	})
}
