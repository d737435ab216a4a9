package doctor

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/internal/shellquote"
)

// fakeKubectl is a kubectl whose `run ... --command -- python3 ARGS` runs
// py ARGS here (with pyArgs first), as the pod's python3 would, whose pod
// then reports Succeeded and whose logs are that output; it records every
// argument it is given.
func fakeKubectl(t *testing.T, py string, pyArgs ...string) (bin, argsLog string) {
	t.Helper()
	dir := t.TempDir()
	argsLog = filepath.Join(dir, "args")
	bin = filepath.Join(dir, "kubectl")
	out := shellquote.Quote(filepath.Join(dir, "out"))
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" >>" + shellquote.Quote(argsLog) + "\n" +
		"for a; do case $a in run|get|logs|delete) verb=$a; break;; esac; done\n" +
		"case $verb in\n" +
		"run) while [ \"$1\" != -- ]; do shift; done; shift 2; " + shellquote.Quote(py) + " " + strings.Join(pyArgs, " ") + " \"$@\" >" + out + " 2>&1; exit 0;;\n" +
		"get) echo Succeeded;;\n" +
		"logs) cat " + out + ";;\n" +
		"esac\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, argsLog
}

// TestDoctorKubernetesImage: with --image, debugpy is checked in a pod of
// the executors' image (through kubectl run), not on the gateway, and the
// test connection through the gateway says it was not checked.
func TestDoctorKubernetesImage(t *testing.T) {
	py := debugpyPython(t)
	const image = "registry.example.com/spark-debugpy:4.3.0"
	for _, tc := range []struct {
		name   string
		pyArgs []string
		v      verdict
		wants  []string
	}{
		{"with debugpy", nil, vOK, []string{"a pod of it has debugpy 1.", "(python 3.", "a release sparkdap supports"}},
		// -S: the same Python without site-packages, as an image without debugpy.
		{"without debugpy", []string{"-S"}, vFail, []string{"cannot import debugpy", "fix: in the image's Dockerfile: RUN pip install --no-cache-dir 'debugpy>=1.6.7,<1.9'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kubectl, argsLog := fakeKubectl(t, py, tc.pyArgs...)
			_, out := runDoctor(t, Config{IDE: freeAddr(t), Executors: freeAddr(t), Python: py,
				Kubernetes: &Kubernetes{Image: image, Namespace: "spark", Kubectl: kubectl}})
			wantCheck(t, out, "executor image "+image, tc.v, tc.wants...)
			if strings.Contains(out, "on the cluster's nodes") {
				t.Errorf("a fix for nodes' Pythons on Kubernetes, whose executors are pods:\n%s", out)
			}
			args, err := os.ReadFile(argsLog)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []string{"--namespace\nspark\nrun\n", "--image\n" + image + "\n", "delete\npod\nsparkdap-doctor-"} {
				if !strings.Contains(string(args), w) {
					t.Errorf("kubectl ran without %q:\n%s", w, args)
				}
			}
		})
	}
	// An image whose debugpy lacks an internal the wrapper needs: the fix
	// is the image's, and the job may force it.
	t.Run("debugpy without an internal", func(t *testing.T) {
		lacking := filepath.Join(t.TempDir(), "debugpy-lacking")
		patchedCopy(t, debuggerDir(t, "debugpy-1.8.22"), lacking, map[string]func(string) string{
			"debugpy/_vendored/pydevd/pydevd.py": replace("\ndef stoptrace():", "\ndef stoptrace_renamed():"),
		})
		kubectl, _ := fakeKubectl(t, pythonWith(t, py, lacking))
		t.Setenv(UntestedDebuggerEnv, "")
		var out bytes.Buffer
		d := &doctor{f: Config{Timeout: 60 * time.Second, Kubernetes: &Kubernetes{Image: image, Kubectl: kubectl}}, out: &out}
		d.checkImage(context.Background())
		t.Log(out.String())
		wantCheck(t, out.String(), "executor image "+image, vFail, "a pod of it has debugpy 1.8.22", "lacks pydevd.stoptrace (for the lease on stops)",
			"fix: in the image's Dockerfile: RUN pip install --no-cache-dir 'debugpy>=1.6.7,<1.9', or set --conf spark.executorEnv."+UntestedDebuggerEnv+"=1")
	})
	t.Run("no kubectl", func(t *testing.T) {
		_, out := runDoctor(t, Config{IDE: freeAddr(t), Executors: freeAddr(t), Python: py,
			Kubernetes: &Kubernetes{Image: image, Kubectl: filepath.Join(t.TempDir(), "kubectl")}})
		wantCheck(t, out, "executor image "+image, vWarn, "not checked")
	})
}
