package main

import (
	"context"
	"errors"
	"flag"
	"io"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/dap"
)

// pycharmFlags are serve's flags for presenting executors to PyCharm's
// "Python Debug Server" instead of a DAP client (see package pycharm).
type pycharmFlags struct {
	ide     string
	pycharm string
}

func addPyCharmFlags(fs *flag.FlagSet) *pycharmFlags {
	p := &pycharmFlags{}
	fs.StringVar(&p.ide, "ide-kind", "dap", "dap (VS Code, nvim-dap, any DAP client) or pycharm")
	fs.StringVar(&p.pycharm, "pycharm", "127.0.0.1:12345", "with --ide-kind pycharm: where PyCharm's Python Debug Server listens")
	return p
}

func (p *pycharmFlags) enabled() bool { return p.ide == "pycharm" }

// run serves executors to PyCharm until ctx ends.
func (p *pycharmFlags) run(ctx context.Context, executors, token string, paths *dap.PathMapper, log zerolog.Logger, stderr io.Writer) error {
	return errors.New("--ide-kind pycharm is not implemented yet")
}
