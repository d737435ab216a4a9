package doctor

// The Kubernetes checks: the executors are pods of an image, not processes
// on the gateway, so their Python is checked in a throwaway pod of that
// image, and what doctor cannot reach from here (the gateway's Service, as
// an executor pod resolves it) is said so.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/shellquote"
)

// Kubernetes is the cluster whose executor pods doctor checks.
type Kubernetes struct {
	Image     string // the executors' container image (spark.kubernetes.container.image)
	Namespace string // where the job's pods run; "" is kubectl's current one
	Kubectl   string // "" is kubectl from PATH
}

// checkImage runs the wrapper's debugger probe with python3 in a pod of
// the executors' image, as Spark's executors run it.
func (d *doctor) checkImage(ctx context.Context) {
	k := d.f.Kubernetes
	name := "executor image " + k.Image
	kubectl := k.Kubectl
	if kubectl == "" {
		kubectl = "kubectl"
	}
	path, err := exec.LookPath(kubectl)
	if err != nil {
		d.report(checkResult{name: name, v: vWarn, detail: "not checked: no kubectl to start a pod of it (" + err.Error() + ")",
			fix: "install kubectl with access to the cluster, or check by hand that the image's python3 imports " + d.debuggerModule()})
		return
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	pod := "sparkdap-doctor-" + hex.EncodeToString(suffix)
	ctx, cancel := context.WithTimeout(ctx, d.f.Timeout)
	defer cancel()
	kc := func(args ...string) (string, string, error) {
		if k.Namespace != "" {
			args = append([]string{"--namespace", k.Namespace}, args...)
		}
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, path, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	// Not `run --attach`: a container that exits before kubectl attaches
	// loses its output there. The pod runs to its end, then its log is read.
	phase := ""
	stdout, stderr, err := kc("run", pod, "--image", k.Image, "--restart=Never", "--labels", "app.kubernetes.io/name=sparkdap-doctor",
		"--command", "--", "python3", "-c", d.debuggerProbe())
	if err == nil {
		defer func() {
			// Its own bound: the checks' context may be spent.
			dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer dcancel()
			args := []string{"delete", "pod", pod, "--wait=false"}
			if k.Namespace != "" {
				args = append([]string{"--namespace", k.Namespace}, args...)
			}
			_ = exec.CommandContext(dctx, path, args...).Run()
		}()
		for phase != "Succeeded" && phase != "Failed" && ctx.Err() == nil {
			var out string
			out, stderr, err = kc("get", "pod", pod, "-o", "jsonpath={.status.phase}")
			if err != nil {
				break
			}
			phase = strings.TrimSpace(out)
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
		if err == nil && phase != "Succeeded" && phase != "Failed" {
			err = fmt.Errorf("the pod did not finish within %s (phase %q)", d.f.Timeout, phase)
		}
		if err == nil {
			var logErr string
			stdout, logErr, err = kc("logs", pod)
			stderr += logErr
		}
	}
	dockerfile := func(req string) string {
		return "in the image's Dockerfile: RUN pip install --no-cache-dir " + shellquote.Quote(req)
	}
	rep, found := parseDebuggerReport(stdout)
	switch {
	case err != nil && ctx.Err() != nil && (phase == "Pending" || phase == ""):
		d.report(checkResult{name: name, v: vWarn, detail: fmt.Sprintf("not checked: a pod of it had not started after %s (pulling the image?)", d.f.Timeout),
			fix: "re-run with a longer --timeout, or see 'kubectl describe pod' for why it waits"})
	case err != nil:
		detail := lastLine(stderr)
		if detail == "" {
			detail = err.Error()
		}
		d.report(checkResult{name: name, v: vFail, detail: "a pod of it did not run python3: " + clean(detail),
			fix: "check the image name and that 'kubectl run' may start pods there; the image needs python3 (Spark's -python3 images) with " + d.debuggerRequirement()})
	case !found && phase == "Failed":
		d.report(checkResult{name: name, v: vFail, detail: "python3 failed in a pod of it: " + clean(lastLine(stdout+"\n"+stderr)),
			fix: "the image needs python3 (Spark's -python3 images) with " + d.debuggerRequirement()})
	case !found:
		d.report(checkResult{name: name, v: vFail, detail: fmt.Sprintf("unexpected answer %q", clean(stdout))})
	default:
		d.report(d.debuggerResult(name, rep, fmt.Sprintf("a pod of it has %s %s (python %s)", rep.name, rep.version, rep.python), dockerfile))
	}
}

// clean makes a line from the cluster fit for the terminal.
func clean(s string) string { return admission.Clean(strings.TrimSpace(s), 200) }
