//go:build linux

package integration

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestDemoWithSparkWorkerOptions runs `sparkdap demo` (the README's first job: the
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
	args := []string{"demo"}
	for _, conf := range []string{
		"spark.python.unix.domain.socket.enabled=true",
		"spark.sql.pyspark.worker.logging.enabled=true",
		"spark.python.udf.pipelined.enabled=true",
	} {
		args = append(args, "--conf", conf)
	}
	ctx := testContext(t, 5*time.Minute)
	out, err := exec.CommandContext(ctx, sparkdapBinary(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("sparkdap %s: %v\n%s", strings.Join(args, " "), err, tail(string(out), 8<<10))
	}
	for _, want := range []string{"both breakpoints hit", "the job finished normally"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, tail(string(out), 8<<10))
		}
	}
}
