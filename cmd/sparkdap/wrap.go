package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sparkdap/sparkdap/workerwrap"
)

func init() {
	register("wrap", "generate remote_debug.py, the Python daemon that attaches Spark workers to sparkdap", newWrapCmd)
}

type wrapOptions struct {
	out  string
	wrap *wrapFlags
}

func newWrapCmd(stderr io.Writer) *cmdSpec {
	o := &wrapOptions{}
	c := &cmdSpec{fs: newFlagSet("wrap", stderr)}
	c.fs.StringVar(&o.out, "o", workerwrap.FileName, "write the wrapper to this `path` (a directory, a file named "+workerwrap.FileName+", or - for stdout)")
	o.wrap = addWrapFlags(c, stderr)
	c.usage(stderr, `usage: sparkdap wrap [-o PATH] [flags]

Writes remote_debug.py, the worker wrapper, for jobs not started with
'sparkdap submit' ('sparkdap conf' prints the settings that use it).

Examples:
  sparkdap wrap -o .                                  # ./remote_debug.py
  sparkdap wrap -o /tmp --proxy edge.example.com:5678 --partitions 0
  sparkdap wrap -o - --wait | less                    # read what it does

Flags:
`)
	c.run = func(args []string, stdout, stderr io.Writer) error { return wrapRun(o, args, stdout, stderr) }
	return c
}

func wrapRun(o *wrapOptions, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q (wrap takes only flags)", args)
	}
	opts, err := o.wrap.options()
	if err != nil {
		return err
	}
	if o.out == "-" {
		return workerwrap.Render(stdout, opts)
	}
	path, err := wrapperPath(o.out)
	if err != nil {
		return err
	}
	if err := workerwrap.WriteFile(path, opts); err != nil {
		return err
	}
	ship, err := o.wrap.shipped(context.Background(), filepath.Dir(path))
	if err != nil {
		return err
	}
	if ship.Wheel != "" {
		fmt.Fprintf(stderr, "sparkdap: wrote %s and, next to it, %s (the debugger the job ships); `sparkdap conf --wrapper %s` prints the Spark settings that use them\n", path, filepath.Base(ship.Wheel), path)
		return nil
	}
	fmt.Fprintf(stderr, "sparkdap: wrote %s; `sparkdap conf --wrapper %s` prints the Spark settings that use it\n", path, path)
	return nil
}

// wrapperPath resolves -o: Spark imports the module by name, so the file
// must be called remote_debug.py.
func wrapperPath(out string) (string, error) {
	if fi, err := os.Stat(out); err == nil && fi.IsDir() {
		out = filepath.Join(out, workerwrap.FileName)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("-o %s: %w", out, err)
	}
	if filepath.Base(out) != workerwrap.FileName {
		return "", fmt.Errorf("-o %s: the file must be named %s, the module Spark is told to run", out, workerwrap.FileName)
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return "", fmt.Errorf("-o %s: %w", out, err)
	}
	return abs, nil
}
