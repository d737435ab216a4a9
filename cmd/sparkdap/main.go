package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// command is one subcommand of the CLI. Each lives in its own file, as a
// newXCmd that declares its flags (see cmdSpec) and an xRun that runs it.
type command struct {
	summary string
	// spec declares the command's flags afresh, writing its usage and
	// notices to stderr; nothing runs until the spec's run.
	spec func(stderr io.Writer) *cmdSpec
}

// run parses args and runs the command.
func (c command) run(args []string, stdout, stderr io.Writer) error {
	return c.spec(stderr).execute(args, stdout, stderr)
}

// commands is filled by init functions in the files beside this one, so that
// adding a subcommand touches only its own file.
var commands = map[string]command{}

func register(name, summary string, spec func(stderr io.Writer) *cmdSpec) {
	commands[name] = command{summary: summary, spec: spec}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sparkdap <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nExamples:")
	fmt.Fprintln(w, "  sparkdap doctor                 # is this machine ready?")
	fmt.Fprintln(w, "  sparkdap vscode                 # add the attach configuration to .vscode/launch.json")
	fmt.Fprintln(w, "  sparkdap serve --root .         # then attach the IDE to 127.0.0.1:4711")
	fmt.Fprintln(w, "  sparkdap submit --partitions 0 -- --master 'local[2]' app.py")
	fmt.Fprintln(w, "  source <(sparkdap completion bash)")
	fmt.Fprintln(w, "\nRun 'sparkdap <command> -h' for a command's flags and examples.")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the exit, so tests can drive the CLI in-process.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "sparkdap: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd.run(args[1:], stdout, stderr); err != nil {
		switch err {
		case errHelp:
			return 0
		case errUsage:
			return 2
		}
		var st exitStatus
		if errors.As(err, &st) {
			return int(st)
		}
		fmt.Fprintf(stderr, "sparkdap %s: %v\n", args[0], err)
		return 1
	}
	return 0
}
