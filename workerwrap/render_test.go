package workerwrap

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/buildinfo"
	"github.com/sparkdap/sparkdap/internal/safefile"
	"github.com/sparkdap/sparkdap/testkit/testenv"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func TestRenderGolden(t *testing.T) {
	tests := []struct {
		name string
		opts func(*Options)
	}{
		{"defaults", func(*Options) {}},
		{"filtered", func(o *Options) {
			o.Proxy = "10.0.0.5:7000"
			o.TokenEnv = "MY_TOKEN"
			o.Partitions = []int{0, 7}
			o.Stages = []int{3}
			o.SampleRate = 0.25
			o.ConnectTimeout = 1500 * time.Millisecond
			o.HandshakeTimeout = 20 * time.Second
			o.Wait = true
			o.PostMortem = true
		}},
		{"pycharm", func(o *Options) {
			o.IDE = IDEPyCharm
			o.Partitions = []int{1}
			o.Wait = true
		}},
		{"embedded_token", func(o *Options) {
			o.Token = `not-a-secret "quoted" \ ünï`
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			tc.opts(&o)
			var buf bytes.Buffer
			if err := Render(&buf, o); err != nil {
				t.Fatalf("Render: %v", err)
			}
			// The file is the settings header, then the module unchanged:
			// the golden file holds the header.
			out := buf.Bytes()
			if !bytes.HasSuffix(out, moduleSource) {
				t.Fatalf("output does not end with python/remote_debug.py")
			}
			head := goldenForm(t, out[:len(out)-len(moduleSource)])
			golden := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(golden, head, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run with -update to create it): %v", err)
			}
			if !bytes.Equal(head, want) {
				t.Errorf("output differs from %s; run `go test ./workerwrap -run TestRenderGolden -update` and review the diff", golden)
			}
		})
	}
}

// goldenForm is a rendered header as its golden file holds it: the
// sparkdap version it bakes is "VERSION", so that a release, which only
// changes buildinfo.Version, changes no golden file. It fails t if the
// header does not bake the version, which the workers' hellos report.
func goldenForm(t *testing.T, head []byte) []byte {
	t.Helper()
	baked := []byte(`    "sparkdap_version": "` + buildinfo.Version + `",` + "\n")
	if bytes.Count(head, baked) != 1 {
		t.Fatalf("the header does not bake %s once:\n%s", bytes.TrimSpace(baked), head)
	}
	return bytes.Replace(head, baked, []byte(`    "sparkdap_version": "VERSION",`+"\n"), 1)
}

func TestRenderRejectsInvalidOptions(t *testing.T) {
	o := NewOptions()
	o.SampleRate = 0
	var buf bytes.Buffer
	err := Render(&buf, o)
	if err == nil || !strings.Contains(err.Error(), "sample rate") {
		t.Fatalf("Render with sample rate 0: got %v, want a sample rate error", err)
	}
	if buf.Len() != 0 {
		t.Errorf("Render wrote %d bytes despite the error", buf.Len())
	}
}

func TestWriteFilePermissions(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		token string
		perm  os.FileMode
	}{{"", 0o644}, {"s3cret", 0o600}} {
		o := NewOptions()
		o.Token = tc.token
		path := filepath.Join(dir, FileName)
		if err := WriteFile(path, o); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != tc.perm {
			t.Errorf("token %q: mode %v, want %v", tc.token, fi.Mode().Perm(), tc.perm)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("WriteFile left %d files behind, want only %s", len(entries), FileName)
	}
}

// A remote_debug.py that is a symlink (to a file outside, standing for
// ~/.bashrc) is refused: neither written through nor replaced.
func TestWriteFileRefusesSymlink(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, "bashrc")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
	if err := os.Symlink(victim, path); err != nil {
		t.Skip("symlinks unavailable:", err)
	}
	err := WriteFile(path, NewOptions())
	if !errors.Is(err, safefile.ErrSymlink) {
		t.Errorf("err %v, want safefile.ErrSymlink", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the link's target was written: %q", b)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v, %v", fi.Mode(), err)
	}
}

func TestPyLiteral(t *testing.T) {
	s := "x"
	tests := []struct {
		in   any
		want string
	}{
		{nil, "None"},
		{(*string)(nil), "None"},
		{&s, `"x"`},
		{"a\"b\\c\n", `"a\"b\\c\n"`},
		{true, "True"},
		{false, "False"},
		{3, "3"},
		{1.0, "1.0"},
		{0.25, "0.25"},
		{[]int(nil), "None"},
		{[]int{}, "[]"},
		{[]int{0, 7}, "[0, 7]"},
	}
	for _, tc := range tests {
		got, err := pyLiteral(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("pyLiteral(%#v) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := pyLiteral(struct{}{}); err == nil {
		t.Error("pyLiteral(struct{}{}) succeeded, want an error")
	}
}

// The module reads the settings the header bakes in, PyCharm flavour and
// the sparkdap version included, as a worker with no SPARKDAP_* variables
// sees them.
func TestRenderedSettingsReachTheModule(t *testing.T) {
	python := testenv.Python(t)
	pycharm := NewOptions()
	pycharm.IDE = IDEPyCharm
	pycharm.Partitions = []int{1}
	filtered := NewOptions()
	filtered.Proxy = "[::1]:7000"
	filtered.Token = `tok "quoted" ü`
	filtered.Stages = []int{3, 4}
	filtered.SampleRate = 0.25
	filtered.ConnectTimeout = 1500 * time.Millisecond
	filtered.Wait = true
	none := NewOptions()
	none.Partitions = []int{} // --partitions none
	for name, o := range map[string]Options{"defaults": NewOptions(), "pycharm": pycharm, "filtered": filtered, "none": none} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := WriteFile(filepath.Join(dir, FileName), o); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(python, "-c", `
import json, sys
sys.path.insert(0, sys.argv[1])
import remote_debug as r
c = r._load_config()
print(json.dumps([r._pycharm(), c["proxy"], c["token"], c["partitions"], c["stages"], c["sample_rate"],
                  c["connect_timeout"], c["handshake_timeout"], c["wait"], c["post_mortem"], c["sparkdap_version"]]))
`, dir)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PYTHONDONTWRITEBYTECODE=1"}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			host, port, _ := net.SplitHostPort(o.Proxy)
			n, _ := strconv.Atoi(port)
			var token any
			if o.Token != "" {
				token = o.Token
			}
			ids := func(v []int) any {
				if v == nil {
					return nil // all
				}
				return v
			}
			wantJSON, _ := json.Marshal([]any{o.IDE == IDEPyCharm, []any{host, n}, token, ids(o.Partitions), ids(o.Stages), o.SampleRate,
				o.ConnectTimeout.Seconds(), o.HandshakeTimeout.Seconds(), o.Wait, o.PostMortem, buildinfo.Version})
			var got, want any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%q: %v", out, err)
			}
			_ = json.Unmarshal(wantJSON, &want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the module read %s, want %s", out, wantJSON)
			}
		})
	}
}

// TestLeaseBakedAndReadBack: the lease is baked into the header in
// seconds (what the worker module reads) and BakedLease, which conf uses to
// say what a wrapper file does, reads it back.
func TestLeaseBakedAndReadBack(t *testing.T) {
	for _, d := range []time.Duration{DefaultLease, 0, MinLease, 90 * time.Second, MaxLease} {
		o := NewOptions()
		o.Lease = d
		var buf bytes.Buffer
		if err := Render(&buf, o); err != nil {
			t.Fatalf("lease %v: %v", d, err)
		}
		got, ok := BakedLease(&buf)
		if !ok || got != d {
			t.Errorf("lease %v: read back %v, %v", d, got, ok)
		}
	}
	if _, ok := BakedLease(strings.NewReader("_BAKED = {\n    \"wait\": False,\n}\n\"lease\": 5.0,\n")); ok {
		t.Error("a header without a lease reads as having one")
	}
}

func TestLeaseValidated(t *testing.T) {
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{{0, true}, {MinLease, true}, {MaxLease, true}, {time.Minute, true},
		{MinLease - time.Millisecond, false}, {-time.Second, false}, {MaxLease + time.Second, false}} {
		o := NewOptions()
		o.Lease = tc.d
		err := o.Validate()
		var se *SettingError
		if tc.ok != (err == nil) || (err != nil && (!errors.As(err, &se) || se.Setting != "Lease")) {
			t.Errorf("lease %v: %v", tc.d, err)
		}
	}
}
