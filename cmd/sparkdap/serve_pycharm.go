package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/pathmap"
	"github.com/sparkdap/sparkdap/pycharm"
)

// pycharmFlags are serve's flags for presenting executors to PyCharm's
// "Python Debug Server" instead of a DAP client (see package pycharm).
type pycharmFlags struct {
	ide     string
	pycharm string
}

func addPyCharmFlags(fs *flag.FlagSet) *pycharmFlags {
	p := &pycharmFlags{}
	defKind(fs, &p.ide, "")
	defAddr(fs, &p.pycharm, "pycharm", defaultPyCharmAddr, "the proxy connects there")
	return p
}

func (p *pycharmFlags) enabled() bool { return p.ide == ideKindPyCharm }

// run serves executors to PyCharm until ctx ends. The proxy connects to
// PyCharm when the first selected worker says hello, so start PyCharm's
// debug server first; workers that come while it is not listening run
// undebugged.
func (p *pycharmFlags) listen(executors, token string, maxSessions int, paths *pathmap.Mapper, log zerolog.Logger, stderr io.Writer,
	captureDir string, captureMaxBytes int, maxStop, exceptionHold time.Duration) (*pycharm.Proxy, error) {
	if err := warnIfPublic(p.pycharm, log); err != nil {
		return nil, fmt.Errorf("--pycharm: %w", err)
	}
	px, err := pycharm.Listen(pycharm.Config{
		Token: token, PyCharm: p.pycharm, MaxSessions: maxSessions, Paths: paths, Log: log, Summary: stderr,
		CaptureDir: captureDir, CaptureMaxBytes: captureMaxBytes, MaxStop: maxStop, ExceptionHold: exceptionHold,
	}, executors)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "sparkdap: executor port %s; PyCharm's Python Debug Server expected at %s\n", px.Addr(), p.pycharm)
	return px, nil
}
