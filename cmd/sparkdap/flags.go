package main

import (
	"errors"
	"flag"
	"io"
	"strings"
)

// errUsage reports that flag parsing already printed what was wrong;
// errHelp that the user asked for -h and got it.
var (
	errUsage = errors.New("usage")
	errHelp  = errors.New("help")
)

// newFlagSet returns a FlagSet that reports errors to stderr and lets the
// caller turn them into errUsage instead of exiting the process.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sparkdap "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args and maps -h and flag errors to errUsage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return errUsage
	}
	return nil
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, ",") }

func (m *multiFlag) Set(v string) error {
	*m = append(*m, v)
	return nil
}
