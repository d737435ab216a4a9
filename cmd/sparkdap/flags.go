package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// errUsage reports that flag parsing already printed what was wrong;
// errHelp that the user asked for -h and got it.
var (
	errUsage = errors.New("usage")
	errHelp  = errors.New("help")
)

// cmdSpec is one subcommand with its flags defined and not yet parsed, in
// the manner of cli/cli's NewCmdX: a newXCmd function declares the flags
// into fs, bound to the fields of an options struct, and returns a cmdSpec
// whose run closes over that struct and calls the command's xRun. Defining
// is thus separate from running: completion and the vocabulary test walk
// fs without running anything.
type cmdSpec struct {
	fs *flag.FlagSet
	// deprecated maps each old spelling still accepted to its replacement,
	// as the notice and the help show it (e.g. "--ide HOST:PORT").
	deprecated map[string]string
	// run runs the command once fs has parsed the arguments; args are the
	// positional arguments left.
	run func(args []string, stdout, stderr io.Writer) error
}

// newFlagSet returns a FlagSet that reports errors to stderr and lets the
// caller turn them into errUsage instead of exiting the process.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sparkdap "+name, flag.ContinueOnError)
	fs.SetOutput(dashWriter{stderr})
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

// execute parses args into the spec's flags and runs it.
func (c *cmdSpec) execute(args []string, stdout, stderr io.Writer) error {
	if err := parseFlags(c.fs, args); err != nil {
		return err
	}
	return c.run(c.fs.Args(), stdout, stderr)
}

// current reports whether a flag of the spec is part of the vocabulary
// (not a deprecated spelling kept for one release).
func (c *cmdSpec) current(name string) bool {
	_, old := c.deprecated[name]
	return !old
}

// deprecate declares old as a spelling still accepted for one release: v
// does what it did, and setting it prints one notice line to stderr
// naming the replacement.
func (c *cmdSpec) deprecate(old, replacement string, v flag.Value, stderr io.Writer) {
	if c.deprecated == nil {
		c.deprecated = map[string]string{}
	}
	c.deprecated[old] = replacement
	c.fs.Var(&deprecatedValue{Value: v, old: old, replacement: replacement, stderr: stderr}, old,
		"deprecated: use "+replacement)
}

// deprecatedValue is a flag.Value that announces its deprecation when set.
type deprecatedValue struct {
	flag.Value
	old, replacement string
	stderr           io.Writer
	announced        bool
}

func (d *deprecatedValue) Set(s string) error {
	if !d.announced {
		d.announced = true
		fmt.Fprintf(d.stderr, "sparkdap: warning: %s is deprecated and will be removed in the next release; use %s\n", dashed(d.old), d.replacement)
	}
	return d.Value.Set(s)
}

// IsBoolFlag keeps a deprecated boolean flag usable without a value.
func (d *deprecatedValue) IsBoolFlag() bool {
	b, ok := d.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// funcValue is a flag.Value whose Set is a function: deprecated spellings
// that write into the replacement's field.
type funcValue struct {
	set    func(string) error
	isBool bool
}

func (f funcValue) String() string      { return "" }
func (f funcValue) Set(s string) error  { return f.set(s) }
func (f funcValue) IsBoolFlag() bool    { return f.isBool }
func (f funcValue) Get() any            { return nil }
func boolFunc(set func(bool)) funcValue { return funcValue{isBool: true, set: setBool(set)} }

func setBool(set func(bool)) func(string) error {
	return func(s string) error {
		switch s {
		case "true", "1", "t", "T", "TRUE", "True":
			set(true)
		case "false", "0", "f", "F", "FALSE", "False":
			set(false)
		default:
			return fmt.Errorf("want true or false, not %q", s)
		}
		return nil
	}
}

// printDefaults is flag.PrintDefaults without the deprecated spellings,
// which follow on one line each with their replacement.
func (c *cmdSpec) printDefaults(w io.Writer) {
	// flag.PrintDefaults' layout, with flags written as they are
	// everywhere else: --name (one-letter ones -n).
	c.fs.VisitAll(func(f *flag.Flag) {
		if !c.current(f.Name) {
			return
		}
		kind, usage := flag.UnquoteUsage(f)
		line := "  " + dashed(f.Name)
		if kind != "" {
			line += " " + kind
		}
		if len(f.Name) == 1 && kind == "" {
			line += "\t"
		} else {
			line += "\n    \t"
		}
		line += strings.ReplaceAll(usage, "\n", "\n    \t")
		if def := f.DefValue; def != "" && def != "false" && def != "0" {
			if g, ok := f.Value.(flag.Getter); ok {
				if _, isString := g.Get().(string); isString {
					def = strconv.Quote(def)
				}
			}
			line += " (default " + def + ")"
		}
		fmt.Fprintln(w, line)
	})
	if len(c.deprecated) == 0 {
		return
	}
	olds := make([]string, 0, len(c.deprecated))
	for o := range c.deprecated {
		olds = append(olds, o)
	}
	sort.Strings(olds)
	fmt.Fprintln(w, "\nDeprecated spellings (still accepted for one release):")
	for _, o := range olds {
		fmt.Fprintf(w, "  %s: use %s\n", dashed(o), c.deprecated[o])
	}
}

// usage sets the FlagSet's usage to head followed by the flags.
func (c *cmdSpec) usage(stderr io.Writer, head string) {
	c.fs.Usage = func() {
		fmt.Fprint(stderr, head)
		c.printDefaults(stderr)
	}
}

// flagError names the flag whose value a library call refused: library
// packages return typed errors and sentinels, and only the CLI knows the
// flag a value came from.
func flagError(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", dashed(name), err)
}

// dashed is how a flag is written: -n for one letter, --name otherwise
// (Go's flag package takes either).
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// dashWriter is a FlagSet's output: the flag package names flags -name
// in its errors, and sparkdap writes --name everywhere (one-letter flags
// keep their single dash).
type dashWriter struct{ w io.Writer }

var flagPkgNameRE = regexp.MustCompile(`(^|[ :])-([A-Za-z0-9][\w.-]+)`)

func (d dashWriter) Write(p []byte) (int, error) {
	if _, err := d.w.Write(flagPkgNameRE.ReplaceAll(p, []byte("$1--$2"))); err != nil {
		return 0, err
	}
	return len(p), nil
}
