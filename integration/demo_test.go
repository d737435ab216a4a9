//go:build linux

package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestDemoWithSparkWorkerOptions runs the demo (./scripts/demo's job: the
// loans example on local[2], a scripted IDE stopping at a UDF body and at
// a --py-files module) with the PySpark worker options that change how
// Spark talks to its Python workers: Unix-domain-socket daemons (4.1),
// worker logging that replaces stdout and stderr during a UDF (4.1), and
// the pipelined UDF reader thread (4.3). It must still stop at both
// breakpoints and end with the job's result. All three go in one job: a
// Spark job here costs half a minute, and each run proved alone in the
// same way when this test was written. Spark versions without an option
// ignore it.
func TestDemoWithSparkWorkerOptions(t *testing.T) {
	testenv.SkipIfShort(t, "runs a Spark job")
	requireSpark(t)
	demo := filepath.Join(t.TempDir(), "demo")
	example, err := filepath.Abs(filepath.Join("..", "examples", "loans"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("go", "build", "-o", demo, "github.com/sparkdap/sparkdap/examples/demo").CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/demo: %v\n%s", err, out)
	}
	args := []string{"--sparkdap", sparkdapBinary(t), "--example", example, "--timeout", "4m"}
	for _, conf := range []string{
		"spark.python.unix.domain.socket.enabled=true",
		"spark.sql.pyspark.worker.logging.enabled=true",
		"spark.python.udf.pipelined.enabled=true",
	} {
		args = append(args, "--conf", conf)
	}
	ctx := testContext(t, 5*time.Minute)
	out, err := exec.CommandContext(ctx, demo, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("demo %s: %v\n%s", strings.Join(args, " "), err, tail(string(out), 8<<10))
	}
	for _, want := range []string{"both breakpoints hit", "the job finished normally"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, tail(string(out), 8<<10))
		}
	}
}
