package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/dap"
	"github.com/sparkdap/sparkdap/internal/dapclient"
)

func init() {
	register("paths", "show how a running proxy maps each executor's paths to local files", newPathsCmd)
}

type pathsOptions struct {
	ide, ideToken string
	asJSON        bool
}

func newPathsCmd(stderr io.Writer) *cmdSpec {
	o := &pathsOptions{}
	c := &cmdSpec{fs: newFlagSet("paths", stderr)}
	defAddr(c.fs, &o.ide, "ide", defaultIDEAddr, "")
	defBool(c.fs, &o.asJSON, "json", "")
	defString(c.fs, &o.ideToken, "ide-token", "", "")
	c.usage(stderr, "usage: sparkdap paths [--ide HOST:PORT] [--json]\n\nPer executor: its code roots, each path mapped to a local file (and by which rule), each path left unmapped (and why), each breakpoint it refused (and pydevd's reason).\n\nExamples:\n  sparkdap paths\n  sparkdap paths --ide 127.0.0.1:4800 --json | jq '.[].unmapped'\n\nFlags:\n")
	c.run = func(args []string, stdout, _ io.Writer) error { return pathsRun(o, args, stdout) }
	return c
}

func pathsRun(o *pathsOptions, args []string, stdout io.Writer) error {
	ide, asJSON, ideToken := &o.ide, &o.asJSON, &o.ideToken
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q (paths takes only flags)", args)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dapclient.Dial(ctx, *ide)
	if err != nil {
		return fmt.Errorf("is 'sparkdap serve' running? %w", err)
	}
	defer c.Close()
	var reports []dap.PathReport
	var req map[string]any
	if tok := cmp.Or(*ideToken, os.Getenv(ideTokenEnv)); tok != "" {
		req = map[string]any{"sparkdapToken": tok}
	}
	if err := c.Call(ctx, dap.PathsCommand, req, &struct {
		Executors *[]dap.PathReport `json:"executors"`
	}{&reports}); err != nil {
		return err
	}
	// The executors' paths, roots and pydevd's reasons are cluster text,
	// printed to a terminal.
	admission.CleanAll(&reports, admission.MaxMessageRunes)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(reports)
	}
	if len(reports) == 0 {
		fmt.Fprintln(stdout, "no executor is connected")
	}
	for _, r := range reports {
		fmt.Fprintf(stdout, "executor %d [%s]\n", r.Executor, r.Label)
		fmt.Fprintf(stdout, "  roots: sparkFiles=%s cwd=%s driverDir=%s codeDirs=%v sysPath=%v\n", r.Roots.SparkFiles, r.Roots.Cwd, r.Roots.DriverDir, r.Roots.CodeDirs, r.Roots.SysPath)
		for _, m := range r.Mapped {
			fmt.Fprintf(stdout, "  %s\n    → %s  (%s)\n", m.Remote, m.Local, m.Rule)
		}
		for _, u := range r.Unmapped {
			fmt.Fprintf(stdout, "  unmapped: %s\n", u)
		}
		for _, b := range r.Refused {
			fmt.Fprintf(stdout, "  breakpoint refused: %s:%d: %s\n", b.Source, b.Line, b.Message)
			if len(b.Tried) > 0 {
				fmt.Fprintf(stdout, "    tried on the executor as: %s\n", strings.Join(b.Tried, ", "))
			}
		}
	}
	return nil
}
