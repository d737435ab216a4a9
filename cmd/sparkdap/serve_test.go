package main

import (
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
	fields := map[string]string{"ide": "127.0.0.1:1", "executors": "127.0.0.1:2", "token": "s3cret"}
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
