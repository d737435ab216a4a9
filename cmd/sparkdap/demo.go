package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sparkdap/sparkdap/demo"
)

func init() {
	register("demo", "run a real local Spark job that stops at two breakpoints, with a scripted IDE: the guided tour", newDemoCmd)
}

type demoOptions struct {
	partitions string
	confs      stringList
	python     string
	verbose    bool
}

func newDemoCmd(stderr io.Writer) *cmdSpec {
	o := &demoOptions{}
	c := &cmdSpec{fs: newFlagSet("demo", stderr)}
	fs := c.fs
	defString(fs, &o.partitions, "partitions", "0", "the demo debugs partition 0 unless told")
	defList(fs, &o.confs, "conf", "")
	defString(fs, &o.python, "python", "", "the job runs on, checked first for what it imports (default: $PYSPARK_PYTHON, else python3)")
	fs.BoolVar(&o.verbose, "verbose", false, "show all of Spark's and the proxy's output")
	c.usage(stderr, `usage: sparkdap demo [--partitions 0] [--conf KEY=VALUE]... [--verbose]

The guided tour. Starts 'sparkdap serve', attaches a scripted DAP client in
place of your IDE, runs the loans example (carried inside sparkdap) with
'sparkdap submit' on local Spark, and shows each executor task that stops
at a breakpoint: in a UDF's body and in a module shipped with --py-files.
Then the job finishes and prints its result.

Needs Java 17 or later and, in your Python: pyspark, debugpy, pandas and
pyarrow (pip install pyspark debugpy pandas pyarrow).

Examples:
  sparkdap demo
  sparkdap demo --partitions 1 --verbose

Flags:
`)
	c.run = func(args []string, stdout, stderr io.Writer) error {
		if len(args) > 0 {
			return fmt.Errorf("unexpected arguments %q (demo takes only flags)", args)
		}
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this sparkdap binary: %w", err)
		}
		// Bounded, so that a job that never stops cannot hold the
		// terminal: a cold first Spark run here takes about a minute.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		return demo.Run(ctx, demo.Options{
			Sparkdap: self, Python: o.python, Partitions: o.partitions, Confs: o.confs,
			Verbose: o.verbose, Out: stdout, Err: stderr,
		})
	}
	return c
}
