package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	pysrc "github.com/sparkdap/sparkdap/capture/python"
)

func init() {
	register("replay", "run a captured executor call (sparkdapCapture) again in your Python, against your local source", newReplayCmd)
}

type replayOptions struct {
	python, debug string
	force, trust  bool
	raw           bool
	maxMemory     sizeValue
}

// sizeValue is --max-memory's SIZE in bytes, 0 when not given: 512MiB,
// 2GiB, 2G or a number of bytes (K, M, G and T are binary, with or
// without iB or B), as the Python side reads it (parse_size).
type sizeValue int64

var sizeRE = regexp.MustCompile(`(?i)^([0-9]+)\s*(?:([KMGT])(?:I?B)?|B)?$`)

func (s *sizeValue) String() string {
	if s == nil || *s == 0 {
		return ""
	}
	return strconv.FormatInt(int64(*s), 10)
}

func (s *sizeValue) Get() any { return int64(*s) }

func (s *sizeValue) Set(text string) error {
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(text))
	if m == nil {
		return fmt.Errorf("want a size such as 512MiB or 2GiB, got %q", text)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	shift := map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[strings.ToUpper(m[2])]
	if err != nil || n <= 0 || n > (1<<62)>>shift {
		return fmt.Errorf("want a size above 0 such as 512MiB or 2GiB, got %q", text)
	}
	*s = sizeValue(n << shift)
	return nil
}

func newReplayCmd(stderr io.Writer) *cmdSpec {
	o := &replayOptions{}
	c := &cmdSpec{fs: newFlagSet("replay", stderr)}
	defString(c.fs, &o.python, "python", "python3", "the one the call is replayed in; it needs numpy, pandas, pyarrow or pyspark when the captured values are of theirs, "+
		"and with --trust-captured-code the capture's Python major.minor")
	c.fs.BoolVar(&o.force, "force", false, "with --trust-captured-code, unpickle a capture made by another Python major.minor anyway")
	c.fs.BoolVar(&o.trust, "trust-captured-code", false, "unpickle what the capture carries pickled: the function, run when there is no local source, "+
		"and the values of types its data cannot hold; the cluster chose those bytes, so only for a capture from a cluster you trust")
	c.fs.BoolVar(&o.raw, "raw-output", false, "print the capture's text, the returned value and exception messages as they are; "+
		"by default their control characters (escape sequences, carriage returns, newlines in one value) are printed as visible escapes, "+
		"since the cluster chose those bytes")
	// The default bounds what a hostile capture makes replay allocate by
	// what the file itself could plausibly unpack to: a capture's values
	// built take a few times their encoded bytes (pandas adds a Python
	// object per row of text), so 64 times the file, at least 64 MiB for a
	// small capture of text columns, at most 1 GiB, which a laptop spares;
	// a larger value you trust takes the flag.
	c.fs.Var(&o.maxMemory, "max-memory", "bound on the memory the capture's values take as replay builds them: "+
		"a `SIZE` such as 512MiB or 2GiB (default 64 times the capture file's size, at least 64MiB, at most 1GiB); "+
		"a value over it (as its encoding declares it: Arrow lengths, .npy shapes, JSON containers) is refused, exit status 2")
	c.fs.StringVar(&o.debug, "debug", "", "run under debugpy listening on `HOST:PORT` and wait for your IDE to attach there before the call")
	c.usage(stderr, "usage: sparkdap replay [--python PYTHON] [--debug HOST:PORT] [--force] [--trust-captured-code] [--raw-output] [--max-memory SIZE] CAPTURE\n\n"+
		"Runs the function of a capture (the file a sparkdapCapture request wrote) with its arguments in your Python and\n"+
		"prints what it returns or raises. The function comes from your local source, so your edits take effect: from the\n"+
		"local file serve mapped its executor path to, under serve's --root (a top-level def, a nested def or a lambda, found\n"+
		"by its name and line, with its captured closure values), running only that file's top-level imports, defs and classes,\n"+
		"never a module the capture names. The capture came from the cluster: nothing of it is unpickled unless you pass\n"+
		"--trust-captured-code, and its text is printed with control characters escaped unless you pass --raw-output.\n"+
		"Its data is tagged JSON (Python values, datetime, Decimal, Row, numpy as .npy, pandas and pyarrow as Arrow IPC);\n"+
		"a value of another type, and the pickled function, need the flag. Exit status: 0 it returned, 1 it raised,\n"+
		"2 the capture could not be replayed (a malformed capture included, or a value over --max-memory).\n\n"+
		"Examples:\n  sparkdap replay ~/.cache/sparkdap/captures/parse-e1-20260101T120000.000.json\n"+
		"  sparkdap replay --debug 127.0.0.1:5679 CAPTURE   # then attach VS Code to 127.0.0.1:5679\n\nFlags:\n")
	c.run = func(args []string, stdout, stderr io.Writer) error { return replayRun(o, args, stdout, stderr) }
	return c
}

func replayRun(o *replayOptions, args []string, stdout, stderr io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("want one capture file, got %d arguments", len(args))
	}
	if _, err := os.Stat(args[0]); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "sparkdap-replay-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for name, text := range pysrc.ReplayFiles() {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			return err
		}
	}
	script := filepath.Join(dir, pysrc.ReplayMain)
	pyArgs := []string{script, args[0]}
	if o.debug != "" {
		// pydevd misses breakpoints in frozen modules, and says so.
		pyArgs = append([]string{"-X", "frozen_modules=off"}, pyArgs...)
	}
	if o.force {
		pyArgs = append(pyArgs, "--force")
	}
	if o.trust {
		pyArgs = append(pyArgs, "--trust-captured-code")
	}
	if o.raw {
		pyArgs = append(pyArgs, "--raw-output")
	}
	if o.maxMemory > 0 {
		pyArgs = append(pyArgs, "--max-memory", o.maxMemory.String())
	}
	if o.debug != "" {
		pyArgs = append(pyArgs, "--debug", o.debug)
	}
	cmd := exec.Command(o.python, pyArgs...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() > 0 {
		// The replay said what happened; its status says which outcome.
		return exitStatus(ee.ExitCode())
	}
	if err != nil {
		return flagError("python", err)
	}
	return nil
}

// exitStatus ends the command with that status and no message of its own.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
