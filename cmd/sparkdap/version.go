package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/sparkdap/sparkdap/internal/buildinfo"
)

func init() {
	register("version", "print sparkdap's version, the commit and the Go version it was built with", newVersionCmd)
}

func newVersionCmd(stderr io.Writer) *cmdSpec {
	var asJSON bool
	c := &cmdSpec{fs: newFlagSet("version", stderr)}
	defBool(c.fs, &asJSON, "json", "")
	c.usage(stderr, `usage: sparkdap version [--json]

Prints the version of this sparkdap, the git commit it was built from and
the Go version that built it. The worker wrapper it writes carries the
same version.

Examples:
  sparkdap version
  sparkdap version --json

Flags:
`)
	c.run = func(args []string, stdout, _ io.Writer) error {
		if len(args) > 0 {
			return fmt.Errorf("unexpected arguments %q (version takes only flags)", args)
		}
		return versionRun(buildinfo.Read(), asJSON, stdout)
	}
	return c
}

func versionRun(info buildinfo.Info, asJSON bool, stdout io.Writer) error {
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(info)
	}
	_, err := fmt.Fprintln(stdout, info.String())
	return err
}
