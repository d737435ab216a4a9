package main

import (
	"bytes"
	"flag"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/control"
)

// TestDoctorFlagErrors: doctor's own checks live in doctor; here,
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

// TestDoctorShipDebugger: doctor takes the job's --ship-debugger, auto by
// default as in submit, conf and wrap, and counts on a shipped debugpy
// unless the job ships none; PyCharm jobs ship the pydevd-pycharm of the
// build named.
func TestDoctorShipDebugger(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		ships bool
		err   string
	}{
		{args: nil, ships: true},
		{args: []string{"--ship-debugger", "always"}, ships: true},
		{args: []string{"--ship-debugger", "never"}, ships: false},
		{args: []string{"--pycharm-build", "253.33813.30"}, ships: true},
		{args: []string{"--pycharm-build", "253.33813.30", "--ship-debugger", "never"}, ships: false},
		{args: []string{"--ship-debugger", "sometimes"}, err: "want auto, always or never"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stderr bytes.Buffer
			c := newDoctorCmd(&stderr)
			f := &doctorFlags{}
			err := c.fs.Parse(tc.args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parse: %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The flags bound to the command's own doctorFlags: read them back.
			c.fs.VisitAll(func(fl *flag.Flag) {
				switch fl.Name {
				case "ship-debugger":
					f.shipDebugger = fl.Value.String()
				case "pycharm-build":
					f.pycharmBuild = fl.Value.String()
				}
			})
			if got := f.config().ShipsDebugger; got != tc.ships {
				t.Errorf("ShipsDebugger = %v, want %v", got, tc.ships)
			}
		})
	}
}

// TestDoctorControl: doctor asks the serve on --control which sparkdap
// the running job's wrappers come from; by default the socket derived
// from --ide, as capture, select and workers find it.
func TestDoctorControl(t *testing.T) {
	c := newDoctorCmd(io.Discard)
	fl := c.fs.Lookup("control")
	if fl == nil || fl.DefValue != "" {
		t.Fatalf("doctor's --control: %+v, want a flag with no default of its own", fl)
	}
	for _, tc := range []struct {
		name string
		f    doctorFlags
		want string
	}{
		{"default", doctorFlags{ide: defaultIDEAddr}, control.PathFor(defaultIDEAddr)},
		{"another --ide", doctorFlags{ide: "127.0.0.1:4800"}, control.PathFor("127.0.0.1:4800")},
		{"--control", doctorFlags{ide: "127.0.0.1:4800", control: "/run/me/sd.sock"}, "/run/me/sd.sock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.f.config().Control; got != tc.want {
				t.Errorf("Control = %q, want %q", got, tc.want)
			}
		})
	}
	if control.PathFor(defaultIDEAddr) == control.PathFor("127.0.0.1:4800") {
		t.Error("two --ide give one control socket: the cases above test nothing")
	}
}
