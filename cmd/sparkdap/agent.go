package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sparkdap/sparkdap/tunnel"
)

func init() {
	register("agent", "gateway side of serve --ssh: carry executor connections to the proxy over stdio (started by serve)", newAgentCmd)
}

// The agent command is started by `sparkdap serve --ssh` over an SSH session; its
// stdin and stdout are the yamux session to the proxy. Humans do not run
// it directly, but it is a normal command so it can be installed on the
// gateway instead of uploaded.
type agentOptions struct {
	listen              string
	listenRetry         time.Duration
	logLevel, logFormat string
}

func newAgentCmd(stderr io.Writer) *cmdSpec {
	o := &agentOptions{}
	c := &cmdSpec{fs: newFlagSet("agent", stderr)}
	fs := c.fs
	defAddrPlain(fs, &o.listen, "listen", defaultRemoteListen, "`HOST:PORT` executors' debugpy.connect reaches on this gateway (0.0.0.0:5678 lets other hosts in)")
	fs.DurationVar(&o.listenRetry, "listen-retry", 30*time.Second, "keep retrying a busy --listen port this long (a previous agent may still be exiting)")
	defString(fs, &o.logLevel, "log-level", "info", "")
	defString(fs, &o.logFormat, "log-format", "console", "logs go to stderr")
	c.usage(stderr, `usage: sparkdap agent [--listen ADDR] [flags]

The gateway side of 'sparkdap serve --ssh': started by serve over SSH, with
the tunnel on its stdin and stdout. You do not run it by hand; install it on
the gateway to spare serve the upload.

Examples:
  sparkdap serve --ssh me@edge.example.com --agent-path /usr/local/bin/sparkdap
  # which runs on the gateway:  /usr/local/bin/sparkdap agent --listen 127.0.0.1:5678

Flags:
`)
	c.run = func(args []string, stdout, stderr io.Writer) error { return agentRun(o, args, stdout, stderr) }
	return c
}

// agentRun is started by `sparkdap serve --ssh` over an SSH session; its
// stdin and stdout are the yamux session to the proxy.
func agentRun(o *agentOptions, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q", args)
	}
	logger, err := newLogger(stderr, o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	if err := warnIfPublic(o.listen, logger); err != nil {
		return err
	}
	// stdout carries the tunnel: anything else printed there would corrupt
	// it, so point os.Stdout at stderr for any stray print.
	out := os.Stdout
	if stdout != io.Writer(os.Stdout) {
		return fmt.Errorf("agent must own the process's stdout")
	}
	os.Stdout = os.Stderr
	defer func() { os.Stdout = out }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return tunnel.RunAgent(ctx, os.Stdin, out, []io.Closer{os.Stdin, out}, tunnel.AgentConfig{
		Listen: o.listen, ListenRetry: o.listenRetry, Log: logger,
	})
}
