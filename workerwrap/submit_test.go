package workerwrap

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestInjectionApply(t *testing.T) {
	const w = "/tmp/sd/remote_debug.py"
	daemon := []string{"--conf", "spark.python.daemon.module=remote_debug"}
	cwd, _ := os.Getwd()
	driverDir := []string{"--conf", "spark.executorEnv.SPARKDAP_DRIVER_DIR=" + cwd}
	pyPath := append([]string{"--conf", "spark.executorEnv.PYTHONPATH=/tmp/sd"}, driverDir...)
	cat := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		name    string
		inj     Injection
		args    []string
		want    []string
		wantErr string
	}{
		{
			name: "minimal",
			args: []string{"app.py"},
			want: cat(daemon, []string{"--py-files", w}, pyPath, []string{"app.py"}),
		},
		{
			name: "app args untouched",
			args: []string{"--master", "local[2]", "app.py", "--py-files", "x.py", "--conf", "a=b"},
			want: cat([]string{"--master", "local[2]"}, daemon, []string{"--py-files", w}, pyPath,
				[]string{"app.py", "--py-files", "x.py", "--conf", "a=b"}),
		},
		{
			name: "existing --py-files merged",
			args: []string{"--py-files", "a.py,deps.zip", "app.py"},
			want: cat([]string{"--py-files", "a.py,deps.zip," + w}, daemon, pyPath, []string{"app.py"}),
		},
		{
			name: "existing --py-files= form merged",
			args: []string{"--py-files=a.py", "app.py"},
			want: cat([]string{"--py-files=a.py," + w}, daemon, pyPath, []string{"app.py"}),
		},
		{
			name: "last --py-files wins, as in spark-submit",
			args: []string{"--py-files", "a.py", "--py-files", "b.py", "app.py"},
			want: cat([]string{"--py-files", "a.py", "--py-files", "b.py," + w}, daemon, pyPath, []string{"app.py"}),
		},
		{
			name: "spark.submit.pyFiles conf merged instead of adding --py-files",
			args: []string{"--conf=spark.submit.pyFiles=a.py", "app.py"},
			want: cat([]string{"--conf=spark.submit.pyFiles=a.py," + w}, daemon, pyPath, []string{"app.py"}),
		},
		{
			name: "daemon module already right, both conf forms",
			args: []string{"--conf=spark.python.daemon.module=remote_debug", "-c", "spark.executorEnv.PYTHONPATH=/opt/lib", "app.py"},
			want: cat([]string{"--conf=spark.python.daemon.module=remote_debug", "-c", "spark.executorEnv.PYTHONPATH=/tmp/sd:/opt/lib", "--py-files", w},
				driverDir, []string{"app.py"}),
		},
		{
			name: "switches take no value",
			args: []string{"--verbose", "--supervise", "--name", "n", "app.py"},
			want: cat([]string{"--verbose", "--supervise", "--name", "n"}, daemon, []string{"--py-files", w}, pyPath, []string{"app.py"}),
		},
		{
			name: "token conf for a cluster master",
			inj:  Injection{TokenEnv: "SPARKDAP_TOKEN", Token: "t0k"},
			args: []string{"--master", "yarn", "app.py"},
			want: cat([]string{"--master", "yarn"}, daemon, []string{"--py-files", w}, pyPath,
				[]string{"--conf", "spark.executorEnv.SPARKDAP_TOKEN=t0k", "app.py"}),
		},
		{
			name: "no token conf in local mode: workers inherit the environment",
			inj:  Injection{TokenEnv: "SPARKDAP_TOKEN", Token: "t0k"},
			args: []string{"--master=local[*]", "app.py"},
			want: cat([]string{"--master=local[*]"}, daemon, []string{"--py-files", w}, pyPath, []string{"app.py"}),
		},
		{
			name: "user's token conf kept",
			inj:  Injection{TokenEnv: "SPARKDAP_TOKEN", Token: "t0k"},
			args: []string{"--conf", "spark.master=k8s://x", "--conf", "spark.executorEnv.SPARKDAP_TOKEN=mine", "app.py"},
			want: cat([]string{"--conf", "spark.master=k8s://x", "--conf", "spark.executorEnv.SPARKDAP_TOKEN=mine"}, daemon,
				[]string{"--py-files", w}, pyPath, []string{"app.py"}),
		},
		{name: "no application", args: []string{"--master", "local"}, wantErr: "no application"},
		{name: "empty", args: nil, wantErr: "no application"},
		{name: "dangling option", args: []string{"--master"}, wantErr: "--master needs a value"},
		{name: "second separator", args: []string{"--master", "local", "--", "app.py"}, wantErr: `a second "--"`},
		{name: "conflicting daemon module", args: []string{"--conf", "spark.python.daemon.module=mydaemon", "app.py"}, wantErr: "spark.python.daemon.module=mydaemon is already set"},
		{name: "daemon disabled", args: []string{"--conf", "spark.python.use.daemon=false", "app.py"}, wantErr: "spark.python.use.daemon=false"},
		{name: "conf without =", args: []string{"--conf", "novalue", "app.py"}, wantErr: `--conf "novalue": want key=value`},
		{name: "user ships a remote_debug.py", args: []string{"--py-files", "/x/remote_debug.py", "app.py"}, wantErr: "already ships a remote_debug.py"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inj := tc.inj
			inj.WrapperPath = w
			orig := append([]string(nil), tc.args...)
			got, err := inj.Apply(tc.args)
			if !reflect.DeepEqual(tc.args, orig) {
				t.Errorf("Apply modified its input: %q", tc.args)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Apply(%q) error = %v, want %q", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Apply(%q): %v", tc.args, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Apply(%q)\n got %q\nwant %q", tc.args, got, tc.want)
			}
		})
	}
}

func TestInjectionRequiresWrapperName(t *testing.T) {
	_, err := Injection{WrapperPath: "/tmp/other.py"}.Apply([]string{"app.py"})
	if err == nil || !strings.Contains(err.Error(), "remote_debug.py") {
		t.Fatalf("got %v, want an error about the file name", err)
	}
}

func TestIsLocalMaster(t *testing.T) {
	for m, want := range map[string]bool{
		"local": true, "local[2]": true, "local[*]": true, "local[2,3]": true,
		"local-cluster[2,1,1024]": false, "yarn": false, "spark://h:7077": false, "": false,
	} {
		if got := IsLocalMaster(m); got != want {
			t.Errorf("IsLocalMaster(%q) = %v, want %v", m, got, want)
		}
	}
}
