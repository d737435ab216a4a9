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

// launchFile is launch.json decoded with its configurations' names and
// sparkdap's configuration picked out.
type launchFile struct {
	raw     map[string]any
	keys    []string // top-level keys in file order
	names   []string // configuration names in order
	sparkda map[string]any
}

func readLaunch(t *testing.T, data []byte, name string) launchFile {
	t.Helper()
	var lf launchFile
	if err := json.Unmarshal(data, &lf.raw); err != nil {
		t.Fatalf("written launch.json is not plain JSON: %v\n%s", err, data)
	}
	members, err := parseObject(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		lf.keys = append(lf.keys, m.key)
	}
	configs, _ := lf.raw["configurations"].([]any)
	for _, c := range configs {
		m, _ := c.(map[string]any)
		n, _ := m["name"].(string)
		lf.names = append(lf.names, n)
		if n == name {
			lf.sparkda = m
		}
	}
	return lf
}

func TestVSCodeMerge(t *testing.T) {
	const other = `{"name": "Python: current file", "type": "debugpy", "request": "launch", "program": "${file}"}`
	tests := []struct {
		name      string
		existing  *string // nil: no file
		args      []string
		wantNames []string
		wantKeys  []string
		wantErr   string // non-empty: the command fails with this and the file is untouched
		wantWarn  bool   // comments: warning and .bak
		wantSaid  string
		check     func(t *testing.T, lf launchFile)
	}{
		{
			name: "no file", wantNames: []string{defaultAttachName, replayName}, wantKeys: []string{"version", "configurations"},
			wantSaid: "created the file",
		},
		{
			name: "empty file", existing: ptr("  \n"), wantNames: []string{defaultAttachName, replayName},
			wantKeys: []string{"version", "configurations"},
		},
		{
			name: "existing configs kept in order, ours appended", existing: ptr(`{"version": "0.2.0", "configurations": [` + other + `, {"name": "B", "type": "node", "request": "attach"}]}`),
			wantNames: []string{"Python: current file", "B", defaultAttachName, replayName}, wantKeys: []string{"version", "configurations"},
			wantSaid: "added",
			check: func(t *testing.T, lf launchFile) {
				c := lf.raw["configurations"].([]any)[0].(map[string]any)
				if c["program"] != "${file}" {
					t.Errorf("other configuration changed: %v", c)
				}
			},
		},
		{
			name: "same-name config replaced in place", args: []string{"--port", "4800"},
			existing:  ptr(`{"version": "0.2.0", "configurations": [{"name": "` + defaultAttachName + `", "type": "debugpy", "request": "attach", "connect": {"host": "127.0.0.1", "port": 1}, "justMyCode": true, "extra": 1}, ` + other + `, {"name": "` + defaultAttachName + `", "type": "debugpy"}]}`),
			wantNames: []string{defaultAttachName, "Python: current file", replayName}, wantKeys: []string{"version", "configurations"},
			wantSaid: "replaced",
			check: func(t *testing.T, lf launchFile) {
				if lf.sparkda["justMyCode"] != false || lf.sparkda["extra"] != nil {
					t.Errorf("old configuration not replaced: %v", lf.sparkda)
				}
				if port := lf.sparkda["connect"].(map[string]any)["port"]; port != 4800.0 {
					t.Errorf("port %v, want 4800", port)
				}
			},
		},
		{
			name: "custom name leaves the default one alone", args: []string{"--name", "sparkdap prod"},
			existing:  ptr(`{"configurations": [{"name": "` + defaultAttachName + `"}]}`),
			wantNames: []string{defaultAttachName, "sparkdap prod", replayName}, wantKeys: []string{"version", "configurations"},
			check: func(t *testing.T, lf launchFile) {
				first := lf.raw["configurations"].([]any)[0].(map[string]any)
				if lf.names[1] != "sparkdap prod" || len(first) != 1 {
					t.Errorf("names %v, first configuration %v (want it untouched)", lf.names, first)
				}
			},
		},
		{
			name: "comments in JSONC", wantWarn: true,
			existing: ptr(`// VS Code's generated header
{
    // Use IntelliSense to learn about possible attributes.
    "version": "0.2.0",
    /* the list */
    "configurations": [
        ` + other + ` // mine
    ]
}`),
			wantNames: []string{"Python: current file", defaultAttachName, replayName}, wantKeys: []string{"version", "configurations"},
		},
		{
			name: "trailing commas", existing: ptr("{\"version\": \"0.2.0\", \"configurations\": [" + other + ",],}"),
			wantNames: []string{"Python: current file", defaultAttachName, replayName}, wantKeys: []string{"version", "configurations"},
		},
		{
			name: "other top-level keys and their order kept", existing: ptr(`{"compounds": [{"name": "both", "configurations": ["a", "b"]}], "configurations": [], "version": "0.2.0", "inputs": []}`),
			wantNames: []string{defaultAttachName, replayName}, wantKeys: []string{"compounds", "configurations", "version", "inputs"},
		},
		{
			name: "no configurations key", existing: ptr(`{"version": "0.2.0"}`),
			wantNames: []string{defaultAttachName, replayName}, wantKeys: []string{"configurations", "version"},
		},
		{
			name: "path mappings only with --map", args: []string{"--map", "/opt/job=${workspaceFolder}", "--host", "10.0.0.5"},
			wantNames: []string{defaultAttachName, replayName}, wantKeys: []string{"version", "configurations"},
			check: func(t *testing.T, lf launchFile) {
				want := []any{map[string]any{"localRoot": "${workspaceFolder}", "remoteRoot": "/opt/job"}}
				if !reflect.DeepEqual(lf.sparkda["pathMappings"], want) {
					t.Errorf("pathMappings %v, want %v", lf.sparkda["pathMappings"], want)
				}
				if lf.sparkda["connect"].(map[string]any)["host"] != "10.0.0.5" {
					t.Errorf("host not set: %v", lf.sparkda)
				}
			},
		},
		{
			name: "IDE token from the environment", args: []string{"--ide-token"},
			wantNames: []string{defaultAttachName, replayName}, wantKeys: []string{"version", "configurations"},
			check: func(t *testing.T, lf launchFile) {
				if lf.sparkda["sparkdapToken"] != "${env:SPARKDAP_IDE_TOKEN}" {
					t.Errorf("sparkdapToken %v", lf.sparkda["sparkdapToken"])
				}
			},
		},
		{
			name: "replay configuration replaced in place", args: []string{"--replay-debug", "localhost:6000"},
			existing:  ptr(`{"configurations": [{"name": "` + replayName + `", "connect": {"port": 1}}, ` + other + `]}`),
			wantNames: []string{replayName, "Python: current file", defaultAttachName}, wantKeys: []string{"version", "configurations"},
			check: func(t *testing.T, lf launchFile) {
				c := lf.raw["configurations"].([]any)[0].(map[string]any)
				want := map[string]any{"name": replayName, "type": "debugpy", "request": "attach",
					"connect": map[string]any{"host": "localhost", "port": 6000.0}, "justMyCode": true}
				if !reflect.DeepEqual(c, want) {
					t.Errorf("replay configuration %v, want %v", c, want)
				}
			},
		},
		{
			name: "no replay configuration", args: []string{"--replay-debug", ""},
			wantNames: []string{defaultAttachName}, wantKeys: []string{"version", "configurations"},
		},
		{name: "bad --replay-debug", args: []string{"--replay-debug", "5679"}, wantErr: "--replay-debug: want HOST:PORT"},
		{name: "invalid JSON", existing: ptr("{\"version\": \"0.2.0\",\n  \"configurations\": [ {\"name\": } ]\n}"),
			wantErr: "invalid JSON at line 2, column 32"},
		{name: "unterminated comment", existing: ptr("{\n/* oops\n}"), wantErr: "line 2, column 1: unterminated /* comment"},
		{name: "configurations not an array", existing: ptr(`{"configurations": {}}`), wantErr: `"configurations" is not an array`},
		{name: "not an object", existing: ptr(`[]`), wantErr: "must hold a JSON object"},
		{name: "trailing garbage", existing: ptr(`{} {}`), wantErr: "data after the top-level object"},
		{name: "bad --map", args: []string{"--map", "nolocal"}, existing: ptr(`{}`), wantErr: `--map "nolocal": want REMOTE=LOCAL`},
		{name: "bad --port", args: []string{"--port", "0"}, wantErr: "--port 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, ".vscode", "launch.json")
			if tt.existing != nil {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(*tt.existing), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"vscode", "--dir", dir}, tt.args...), &stdout, &stderr)
			got, readErr := os.ReadFile(path)
			if tt.wantErr != "" {
				if code == 0 || !strings.Contains(stderr.String(), tt.wantErr) {
					t.Fatalf("exit %d, stderr %q; want a failure saying %q", code, stderr.String(), tt.wantErr)
				}
				if tt.existing == nil {
					if readErr == nil {
						t.Errorf("a file was created: %s", got)
					}
				} else if string(got) != *tt.existing {
					t.Errorf("file changed on error:\n%s", got)
				}
				return
			}
			if code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
			}
			if readErr != nil {
				t.Fatal(readErr)
			}
			lf := readLaunch(t, got, nameArg(tt.args))
			if !reflect.DeepEqual(lf.names, tt.wantNames) {
				t.Errorf("configurations %q, want %q", lf.names, tt.wantNames)
			}
			if !reflect.DeepEqual(lf.keys, tt.wantKeys) {
				t.Errorf("top-level keys %q, want %q", lf.keys, tt.wantKeys)
			}
			if name := nameArg(tt.args); name == defaultAttachName {
				c := lf.sparkda
				if c == nil || c["type"] != "debugpy" || c["request"] != "attach" || c["justMyCode"] != false {
					t.Errorf("sparkdap configuration wrong: %v", c)
				}
				if _, ok := c["pathMappings"]; ok != (len(tt.args) > 0 && tt.args[0] == "--map") {
					t.Errorf("pathMappings present = %v: %v", ok, c)
				}
			}
			if tt.check != nil {
				tt.check(t, lf)
			}
			bak, bakErr := os.ReadFile(path + ".bak")
			warned := strings.Contains(stderr.String(), "comment(s)")
			if tt.wantWarn {
				if !warned || bakErr != nil || string(bak) != *tt.existing {
					t.Errorf("want a warning and the original kept as .bak; stderr %q, .bak %q (%v)", stderr.String(), bak, bakErr)
				}
			} else if warned || bakErr == nil {
				t.Errorf("unexpected comments warning or .bak: %q", stderr.String())
			}
			if tt.wantSaid != "" && !strings.Contains(stderr.String(), tt.wantSaid) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tt.wantSaid)
			}
			if tt.existing != nil {
				if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("file mode not kept: %v %v", fi.Mode(), err)
				}
			}
			// Running it again changes nothing.
			stderr.Reset()
			if code := run(append([]string{"vscode", "--dir", dir}, tt.args...), &stdout, &stderr); code != 0 {
				t.Fatalf("second run: exit %d: %s", code, stderr.String())
			}
			again, _ := os.ReadFile(path)
			if !bytes.Equal(again, got) || !strings.Contains(stderr.String(), "nothing to do") {
				t.Errorf("second run changed the file or did not say so: %q\n%s", stderr.String(), again)
			}
		})
	}
}

func TestVSCodeMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "typo")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"vscode", "--dir", dir}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "not a directory") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("created the missing workspace folder")
	}
}

func nameArg(args []string) string {
	for i, a := range args {
		if a == "--name" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return defaultAttachName
}

func ptr(s string) *string { return &s }

func TestVSCodeDryRun(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"vscode", "--dir", dir, "-n", "--port", "4999"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, ".vscode")); err == nil {
		t.Error("-n wrote something")
	}
	want := `{
    "version": "0.2.0",
    "configurations": [
        {
            "name": "sparkdap: attach to Spark workers",
            "type": "debugpy",
            "request": "attach",
            "connect": {
                "host": "127.0.0.1",
                "port": 4999
            },
            "justMyCode": false
        },
        {
            "name": "sparkdap: replay capture",
            "type": "debugpy",
            "request": "attach",
            "connect": {
                "host": "127.0.0.1",
                "port": 5679
            },
            "justMyCode": true
        }
    ]
}
`
	if stdout.String() != want {
		t.Errorf("got\n%s\nwant\n%s", stdout.String(), want)
	}
}

// The example's committed launch.json is what `sparkdap vscode` writes.
func TestVSCodeExampleUpToDate(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "loans", ".vscode", "launch.json"))
	if err != nil {
		t.Skip(err)
	}
	res, err := mergeLaunch(b, vscodeAttach{Name: defaultAttachName, Type: "debugpy", Request: "attach",
		Connect: vscodeConnect{Host: "127.0.0.1", Port: 4711}},
		vscodeReplay{Name: replayName, Type: "debugpy", Request: "attach", Connect: vscodeConnect{Host: "127.0.0.1", Port: 5679}, JustMyCode: true})
	if err != nil {
		t.Fatal(err)
	}
	lf := readLaunch(t, res.data, defaultAttachName)
	if len(lf.names) != 2 || !res.replaced || !bytes.Equal(res.data, b) {
		t.Errorf("examples/loans/.vscode/launch.json: merge gave %q", lf.names)
	}
}

func TestPyCharmHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"pycharm", "--port", "5005", "--build", "251.1"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"Python Debug Server", "Port:           5005", "pydevd-pycharm~=251.1",
		"sparkdap serve --ide-kind pycharm --pycharm 127.0.0.1:5005"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	if code := run([]string{"pycharm", "--port", "70000"}, &stdout, &stderr); code != 1 {
		t.Errorf("bad port: exit %d", code)
	}
}

// A repository can commit symlinks under .vscode. `sparkdap vscode` run in it
// must not write through them to a file outside (here standing for
// ~/.bashrc), nor replace them: it refuses and changes nothing.
func TestVSCodeRefusesSymlinks(t *testing.T) {
	const commented = "{\n  // a comment, so a .bak is kept\n  \"version\": \"0.2.0\", \"configurations\": []\n}\n"
	const victimText = "export PATH=$HOME/bin:$PATH\n"
	tests := []struct {
		name string
		// plant lays out the repository at dir, given a victim file and a
		// victim folder outside it.
		plant func(t *testing.T, dir, victimFile, victimDir string)
	}{
		{name: "launch.json.bak links to a victim", plant: func(t *testing.T, dir, victimFile, _ string) {
			mustWrite(t, filepath.Join(dir, ".vscode", "launch.json"), commented)
			mustSymlink(t, victimFile, filepath.Join(dir, ".vscode", "launch.json.bak"))
		}},
		// A JSON file outside, so that only the link stops the rewrite.
		{name: "launch.json links to a victim", plant: func(t *testing.T, dir, _, victimDir string) {
			if err := os.MkdirAll(filepath.Join(dir, ".vscode"), 0o755); err != nil {
				t.Fatal(err)
			}
			mustSymlink(t, filepath.Join(victimDir, "launch.json"), filepath.Join(dir, ".vscode", "launch.json"))
		}},
		{name: ".vscode links to a victim folder", plant: func(t *testing.T, dir, _, victimDir string) {
			mustSymlink(t, victimDir, filepath.Join(dir, ".vscode"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, outside := t.TempDir(), t.TempDir()
			victimFile := filepath.Join(outside, "bashrc")
			victimDir := filepath.Join(outside, "config")
			mustWrite(t, victimFile, victimText)
			mustWrite(t, filepath.Join(victimDir, "launch.json"), commented)
			tt.plant(t, dir, victimFile, victimDir)
			before := snapshot(t, dir)

			var stdout, stderr bytes.Buffer
			code := run([]string{"vscode", "--dir", dir}, &stdout, &stderr)
			if code != 1 || !strings.Contains(stderr.String(), "symbolic link") {
				t.Errorf("exit %d, stderr %q; want 1 and a word about the symbolic link", code, stderr.String())
			}
			if b, _ := os.ReadFile(victimFile); string(b) != victimText {
				t.Errorf("the file outside the repository was overwritten:\n%s", b)
			}
			if got := snapshot(t, victimDir); !reflect.DeepEqual(got, map[string]string{"launch.json": commented}) {
				t.Errorf("the folder outside the repository changed: %q", got)
			}
			if after := snapshot(t, dir); !reflect.DeepEqual(after, before) {
				t.Errorf("the repository changed:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

// snapshot is every entry under dir, not following links: a link as
// "-> target", a file as its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			m[rel] = "-> " + target
			return err
		case d.IsDir():
			m[rel] = "dir"
		default:
			b, err := os.ReadFile(p)
			m[rel] = string(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skip("symlinks unavailable:", err)
	}
}
