//go:build linux

package integration

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestSubmitTokenStaysOutOfArgvEventLogAndUI runs a real `sparkdap submit`
// job with the event log on and the UI on a loopback port, and while it
// runs looks for the token where other users and Spark's own records
// would show it: every process's command line, the event log, the REST
// API's environment page. The job's master is not on the command line (it
// comes from the script, as from spark-defaults.conf), so submit cannot
// count on local mode's inherited environment. The worker it debugs still
// attaches: the token reached it, baked into the shipped wrapper.
func TestSubmitTokenStaysOutOfArgvEventLogAndUI(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	ctx := testContext(t, 5*time.Minute)
	p := startProxy(t, ctx)
	dir := t.TempDir()
	job := filepath.Join(dir, "held_job.py")
	copyFile(t, filepath.Join("testdata", "held_job.py"), job)
	eventLog := filepath.Join(dir, "events")
	if err := os.Mkdir(eventLog, 0o700); err != nil {
		t.Fatal(err)
	}
	ready, release := filepath.Join(dir, "ready"), filepath.Join(dir, "release")
	uiPort := freePort(t, "127.0.0.1")
	r := startSpark(t, ctx, dir, []string{"SPARKDAP_TOKEN=" + p.Token, "SPARK_LOCAL_IP=127.0.0.1"}, sparkdapBinary(t),
		"submit", "--proxy", p.Executors, "--partitions", "1", "--",
		"--conf", "spark.eventLog.enabled=true", "--conf", "spark.eventLog.dir=file://"+eventLog,
		// Plain text, so that the search below means something (Spark 4
		// compresses event logs by default).
		"--conf", "spark.eventLog.compress=false",
		"--conf", "spark.ui.port="+strconv.Itoa(uiPort), "--conf", "spark.driver.host=127.0.0.1",
		job, ready, release)
	defer os.WriteFile(release, nil, 0o600)

	var appID string
	for appID == "" {
		select {
		case <-r.done:
			t.Fatalf("the job ended before it was ready: %v", r.err)
		case <-ctx.Done():
			t.Fatal("the job never got ready")
		case <-time.After(200 * time.Millisecond):
		}
		if b, err := os.ReadFile(ready); err == nil {
			appID = strings.Fields(string(b))[0]
		}
	}

	// The argv of every process of the job (sparkdap submit, spark-submit,
	// the JVM, the Python daemon and workers: its process group), while it
	// runs. Only the job's: the proxy this harness starts takes --token,
	// and other tests share the machine.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	seen := 0
	var jvm, daemon bool
	for _, f := range procs {
		stat, err := os.ReadFile(filepath.Join(filepath.Dir(f), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces, not ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 3 || fields[2] != strconv.Itoa(r.pid) {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil || len(b) == 0 {
			continue
		}
		seen++
		jvm = jvm || bytes.Contains(b, []byte("org.apache.spark.deploy.SparkSubmit"))
		daemon = daemon || bytes.Contains(b, []byte("remote_debug"))
		if bytes.Contains(b, []byte(p.Token)) {
			t.Errorf("%s carries the token: %q", f, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
		if bytes.Contains(b, []byte("spark.executorEnv.SPARKDAP_TOKEN")) {
			t.Errorf("%s sets the token's executor variable: %q", f, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
	if !jvm || !daemon {
		t.Fatalf("read %d command lines of the job's processes, JVM among them %v, sparkdap's daemon %v", seen, jvm, daemon)
	}

	// The UI's REST API, while the job runs.
	url := "http://127.0.0.1:" + strconv.Itoa(uiPort) + "/api/v1/applications/" + appID + "/environment"
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	env, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(env, []byte("spark.eventLog.enabled")) {
		t.Fatalf("GET %s: %s %.300s", url, resp.Status, env)
	}
	if bytes.Contains(env, []byte(p.Token)) || bytes.Contains(env, []byte("SPARKDAP_TOKEN")) {
		t.Errorf("the UI's environment page names the token: %s", env)
	}

	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r.wait(t, ctx)
	// Rolling event logs are a directory of files.
	var events []byte
	err = filepath.WalkDir(eventLog, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		events = append(events, b...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(events, []byte("SparkListenerEnvironmentUpdate")) || !bytes.Contains(events, []byte("spark.python.daemon.module")) {
		t.Fatalf("the event log (%d bytes) has no environment update naming sparkdap's conf", len(events))
	}
	if bytes.Contains(events, []byte(p.Token)) || bytes.Contains(events, []byte("SPARKDAP_TOKEN")) {
		t.Errorf("the event log names the token")
	}
	// The debugged partition attached: the token reached the worker.
	if !strings.Contains(p.Log(), "attached") {
		t.Errorf("no worker attached; proxy log:\n%s", p.Log())
	}
}
