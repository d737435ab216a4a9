package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/control"
	"github.com/sparkdap/sparkdap/dap"
	"github.com/sparkdap/sparkdap/internal/logsink"
	"github.com/sparkdap/sparkdap/internal/safefile"
	"github.com/sparkdap/sparkdap/pathmap"
	"github.com/sparkdap/sparkdap/selection"
)

func init() {
	register("serve", "run the DAP proxy: IDEs attach on one port, executors connect on another", newServeCmd)
}

// tokenEnv is where sparkdap looks for the executors' access token when no
// flag gives one; the generated worker wrapper reads the same variable.
const tokenEnv = "SPARKDAP_TOKEN"

// ideTokenEnv is where sparkdap looks for the IDE token when no flag gives
// one. Unlike the executors' token, none is generated: without one the IDE
// port relies on listening on loopback only.
const ideTokenEnv = "SPARKDAP_IDE_TOKEN"

// defaultMaxStop is --max-stop's default: longer than anyone looks at one
// stop, short enough that a forgotten breakpoint does not hold a cluster
// slot (a task, with barrier execution a stage) through the night.
const defaultMaxStop = 30 * time.Minute

type serveOptions struct {
	ide, executors      string
	token, tokenFile    string
	ideToken            string
	ideTokenFile        string
	allowWeakToken      bool
	readyFile           string
	maxSessions         int
	maxMessageBytes     int
	requestTimeout      time.Duration
	maxStop             time.Duration
	exceptionHold       time.Duration
	merged              bool
	captureDir          string
	control             string
	captureMaxBytes     int
	root                string
	maps                stringList
	noPathMapping       bool
	logLevel, logFormat string
	live                string
	tun                 *tunnelFlags
	pyc                 *pycharmFlags
}

func newServeCmd(stderr io.Writer) *cmdSpec {
	c, _ := serveCmd(stderr)
	return c
}

// serveCmd is newServeCmd with the options its flags fill in.
func serveCmd(stderr io.Writer) (*cmdSpec, *serveOptions) {
	f := &serveOptions{}
	c := &cmdSpec{fs: newFlagSet("serve", stderr)}
	fs := c.fs
	defAddr(fs, &f.ide, "ide", defaultIDEAddr, "")
	defAddr(fs, &f.executors, "executors", defaultExecutorAddr, "")
	defString(fs, &f.token, "token", "", "the executors must present it; without one a random token is generated")
	fs.StringVar(&f.tokenFile, "token-file", "", "read the access token from this file")
	defString(fs, &f.ideToken, "ide-token", "", "")
	fs.StringVar(&f.ideTokenFile, "ide-token-file", "", "read the IDE token from this file")
	defBool(fs, &f.allowWeakToken, "allow-weak-token", "the executors' and the IDE token (serve refuses to start with a weaker one otherwise)")
	fs.StringVar(&f.readyFile, "ready-file", "", "once listening, write {\"ide\",\"executors\",\"token\"} as JSON to this file (mode 0600)")
	fs.IntVar(&f.maxSessions, "max-sessions", 0, "debug at most this many executors at once; others run undebugged (0 = no limit)")
	fs.IntVar(&f.maxMessageBytes, "max-message-bytes", dap.DefaultMaxMessageBytes, "largest DAP message accepted from any peer")
	fs.DurationVar(&f.requestTimeout, "request-timeout", 30*time.Second, "how long the IDE waits for an executor's answer")
	fs.DurationVar(&f.maxStop, "max-stop", defaultMaxStop, "resume a worker stopped this long with no request from the IDE about it, and tell the IDE (0 = never)")
	fs.DurationVar(&f.exceptionHold, "exception-hold", selection.DefaultExceptionHold, "with exception breakpoints on, the first task to raise an exception of a type at a place stops; the others of that group wait this long (for 'sparkdap select --task'), then run on as without a debugger")
	fs.StringVar(&f.captureDir, "capture-dir", defaultCaptureDir(), "where sparkdapCapture writes capture files for `sparkdap replay` (created mode 0700)")
	fs.IntVar(&f.captureMaxBytes, "capture-max-bytes", dap.DefaultCaptureMaxBytes, "largest capture (pickled function and arguments) taken from an executor")
	defString(fs, &f.control, "control", "", "")
	fs.BoolVar(&f.merged, "merged", false, "show all executors' threads in one session even if the client supports child sessions")
	fs.StringVar(&f.root, "root", ".", "local project root: executor paths are mapped to the Python files under it")
	fs.Var(&f.maps, "map", "REMOTE_PREFIX=LOCAL_PREFIX path rule, tried first; REMOTE may be a regular expression (repeatable)")
	fs.BoolVar(&f.noPathMapping, "no-path-mapping", false, "pass paths through unchanged (executors see the same files as the IDE)")
	defString(fs, &f.logLevel, "log-level", "info", "")
	defString(fs, &f.logFormat, "log-format", "console", "")
	fs.StringVar(&f.live, "live", "auto", "live status view at the bottom of the terminal: auto (when stderr is a terminal), on or off")
	f.tun = addTunnelFlags(fs)
	f.pyc = addPyCharmFlags(fs)
	c.usage(stderr, "usage: sparkdap serve [flags]\n\nExamples:\n  SPARKDAP_TOKEN=$(openssl rand -hex 16) sparkdap serve --ide 127.0.0.1:4711 --executors 127.0.0.1:5678\n  sparkdap serve --root ~/src/myjob --map '/tmp/spark-[^/]+/userFiles-[0-9a-f-]+=/home/me/src/myjob'\n  sparkdap serve --root ~/src/myjob --ssh me@edge.example.com --remote-listen 0.0.0.0:5678\n  sparkdap serve --ide-kind pycharm --pycharm 127.0.0.1:12345\n\nFlags:\n")
	c.run = func(args []string, _, stderr io.Writer) error { return serveRun(f, args, stderr) }
	return c, f
}

func serveRun(f *serveOptions, args []string, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serveUntil(ctx, f, args, stderr)
}

// serveUntil is serve until ctx ends (a signal, in serveRun).
func serveUntil(ctx context.Context, f *serveOptions, args []string, stderr io.Writer) error {
	tun, pyc := f.tun, f.pyc
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q", args)
	}
	if f.exceptionHold <= 0 || f.exceptionHold > 10*time.Minute {
		return fmt.Errorf("--exception-hold %s: want a duration above 0 and at most 10m: a held task holds its executor's slot", f.exceptionHold)
	}
	if f.maxStop < 0 {
		return fmt.Errorf("--max-stop %s: want a duration of 0 (no limit) or more", f.maxStop)
	}
	view, err := newLiveView(f.live, f.logFormat, stderr)
	if err != nil {
		return err
	}
	color := isTerminal(stderr)
	if view != nil {
		// Everything else writes through the view, above it.
		stderr = view.term
		defer view.term.Close()
	}
	// Everything serve prints (log lines, the hubs' summaries, the tunnel's
	// news) goes through one Sink: the proxy prints while it holds its
	// locks and on its connections' read loops, and a terminal paused with
	// Ctrl-S or a pipe nobody reads must not stop it. Lines that do not
	// fit while stderr is not read are dropped and counted.
	sink := logsink.New(stderr, "stderr", 0)
	defer sink.Close(stderrFlushWait)
	stderr = sink
	logger, err := newLoggerColor(stderr, f.logLevel, f.logFormat, color)
	if err != nil {
		return err
	}
	token, from, err := resolveToken(f.token, f.tokenFile)
	if err != nil {
		return err
	}
	generated := from == ""
	ideToken, ideFrom, err := resolveIDEToken(f.ideToken, f.ideTokenFile)
	if err != nil {
		return err
	}
	for _, t := range []struct{ token, from, risk string }{{token, from, executorTokenRisk}, {ideToken, ideFrom, ideTokenRisk}} {
		if t.from == "" {
			continue // generated, or no IDE token
		}
		warning, err := checkToken(t.token, t.from, t.risk, f.allowWeakToken)
		if err != nil {
			return err
		}
		if warning != "" {
			fmt.Fprintln(stderr, warning)
		}
	}
	for _, a := range []string{f.ide, f.executors} {
		if err := warnIfPublic(a, logger); err != nil {
			return err
		}
	}
	var paths *pathmap.Mapper
	if !f.noPathMapping {
		var rules []pathmap.Rule
		for _, m := range f.maps {
			r, err := pathmap.ParseRule(m)
			if err != nil {
				return flagError("map", err)
			}
			rules = append(rules, r)
		}
		if paths, err = pathmap.New(f.root, rules); err != nil {
			return flagError("root", err)
		}
	}
	if err := captureDirReady(f.captureDir); err != nil {
		return err
	}
	// The executor side: the DAP hub, or the PyCharm proxy.
	var (
		serve  func(context.Context) error
		handle func(context.Context, net.Conn)
		ready  = map[string]string{"token": token}
		// backend answers `sparkdap capture`; its socket's default name
		// derives from controlIDE, the IDE port's address.
		backend    control.Backend
		controlIDE = f.ide
	)
	switch {
	case pyc.enabled():
		px, err := pyc.listen(f.executors, token, f.maxSessions, paths, logger, stderr, f.captureDir, f.captureMaxBytes, f.maxStop, f.exceptionHold)
		if err != nil {
			return err
		}
		serve, handle = px.Serve, px.ServeExecutor
		backend = px
		ready["executors"], ready["pycharm"] = px.Addr().String(), pyc.pycharm
	default:
		if view != nil {
			defer func() { view.stop() }()
		}
		hub := dap.NewHub(dap.Config{
			Token: token, IDEToken: ideToken, MaxSessions: f.maxSessions, MaxMessageBytes: f.maxMessageBytes,
			RequestTimeout: f.requestTimeout, MaxStop: f.maxStop, ExceptionHold: f.exceptionHold, Merged: f.merged, Paths: paths, Summary: stderr, Log: logger,
			CaptureDir: f.captureDir, CaptureMaxBytes: f.captureMaxBytes,
		})
		// On the way out: the refusals still being counted are summed up,
		// so the terminal accounts for every worker that ran undebugged.
		defer hub.Close()
		srv, err := dap.Listen(hub, f.ide, f.executors)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "sparkdap: IDE port %s (attach your debugger here), executor port %s\n", srv.IDEAddr(), srv.ExecutorAddr())
		serve, handle = srv.Serve, hub.ServeExecutor
		backend, controlIDE = hub, srv.IDEAddr().String()
		ready["ide"], ready["executors"] = srv.IDEAddr().String(), srv.ExecutorAddr().String()
		if view != nil {
			view.start(hub, srv.IDEAddr().String(), srv.ExecutorAddr().String())
		}
	}
	if serve, err = withControl(f.control, controlIDE, backend, serve, ready, logger, stderr); err != nil {
		return err
	}
	if generated {
		fmt.Fprintf(stderr, "sparkdap: no token given; generated one for this run: %s\n", localShell.SetEnv(tokenEnv, token))
	}
	if f.readyFile != "" {
		if err := writeReadyFile(f.readyFile, ready); err != nil {
			return err
		}
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	if !tun.enabled() {
		return serve(ctx)
	}
	tunErr := make(chan error, 1)
	go func() {
		err := tun.run(ctx, handle, logger, stderr)
		if err != nil {
			stop()
		}
		tunErr <- err
	}()
	if err := serve(ctx); err != nil {
		return err
	}
	return <-tunErr
}

// stderrFlushWait bounds how long serve waits on its way out for stderr to
// take the lines still queued: a reader that stopped reading is not waited
// for.
const stderrFlushWait = 2 * time.Second

// isTerminal reports whether w is a terminal that takes ANSI sequences
// (the log's colours).
func isTerminal(w io.Writer) bool {
	_, ok := ansiTerminal(w)
	return ok
}

func newLogger(w io.Writer, level, format string) (zerolog.Logger, error) {
	return newLoggerColor(w, level, format, isTerminal(w))
}

// newLoggerColor is newLogger for a w that stands in front of the real
// output (a logsink.Sink): color says whether that output is a terminal.
func newLoggerColor(w io.Writer, level, format string, color bool) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		return zerolog.Logger{}, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	switch format {
	case "json":
	case "console":
		// Colours only for a terminal: in a file or a pipe (CI logs, a
		// supervisor) escape sequences are noise, and a reader checking the
		// output for control characters from the cluster must see none.
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05.000", NoColor: !color}
	default:
		return zerolog.Logger{}, fmt.Errorf("--log-format %q: want console or json", format)
	}
	zerolog.TimeFieldFormat = time.RFC3339Nano
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// resolveToken picks the executors' token: flag, file, environment, or a
// fresh random one (reported so the user can pass it to the wrapper).
// from names where it came from, for messages; "" for a generated one.
func resolveToken(flagToken, file string) (token, from string, err error) {
	switch {
	case flagToken != "" && file != "":
		return "", "", errors.New("give --token or --token-file, not both")
	case flagToken != "":
		return flagToken, "--token", nil
	case file != "":
		t, err := readTokenFile("token-file", file)
		return t, "--token-file " + file, err
	case os.Getenv(tokenEnv) != "":
		return os.Getenv(tokenEnv), "$" + tokenEnv, nil
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("generate token: %w", err)
	}
	return hex.EncodeToString(b), "", nil
}

// resolveIDEToken picks the IDE token: flag, file, environment, or none;
// from names where it came from ("" for none).
func resolveIDEToken(flagToken, file string) (token, from string, err error) {
	switch {
	case flagToken != "" && file != "":
		return "", "", errors.New("give --ide-token or --ide-token-file, not both")
	case flagToken != "":
		return flagToken, "--ide-token", nil
	case file != "":
		t, err := readTokenFile("ide-token-file", file)
		return t, "--ide-token-file " + file, err
	case os.Getenv(ideTokenEnv) != "":
		return os.Getenv(ideTokenEnv), "$" + ideTokenEnv, nil
	}
	return "", "", nil
}

// readTokenFile reads the token in file, given by flag --name.
func readTokenFile(name, file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--%s: %w", name, err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("--%s %s is empty", name, file)
	}
	return t, nil
}

// warnIfPublic checks an address parses, and says so loudly when it is not
// loopback: that is allowed, but only as the user's explicit choice.
func warnIfPublic(addr string, log zerolog.Logger) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w (want HOST:PORT)", addr, err)
	}
	ip := net.ParseIP(host)
	if host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	log.Warn().Str("address", addr).Msg("listening beyond loopback: anyone who can reach this port and knows the token can debug")
	return nil
}

// writeReadyFile writes the ready file whole (readers poll for it) and
// private (it holds the token). It often lives in a shared directory such as
// /tmp, so safefile neither writes into a file another user planted under a
// predictable temp name nor follows a link there.
func writeReadyFile(path string, fields map[string]string) error {
	b, _ := json.Marshal(fields)
	if err := safefile.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("--ready-file: %w", err)
	}
	return nil
}

// withControl opens the control socket (--control, else the one derived
// from ideAddr) and returns serve wrapped to serve it too, answering for
// backend (the front end). A default
// socket that cannot be made costs only `sparkdap capture`: a warning.
// A directory that is not the user's alone (control.ErrUnsafeDir) stops
// serve, default or not: someone else may be waiting there.
func withControl(flagPath, ideAddr string, backend control.Backend,
	serve func(context.Context) error, ready map[string]string, logger zerolog.Logger, stderr io.Writer) (func(context.Context) error, error) {
	path := flagPath
	if path == "" {
		path = control.PathFor(ideAddr)
	}
	l, err := control.Listen(path)
	if err != nil {
		if errors.Is(err, control.ErrInUse) {
			err = fmt.Errorf("%w (give this one another --ide port or --control)", err)
		}
		if flagPath != "" {
			// The process ends with this error: it closes the listeners.
			return nil, flagError("control", err)
		}
		if errors.Is(err, control.ErrUnsafeDir) {
			return nil, fmt.Errorf("control socket: %w (or give --control PATH)", err)
		}
		logger.Warn().Err(err).Msg("no control socket: sparkdap capture cannot reach this proxy (give --control PATH for one)")
		return serve, nil
	}
	fmt.Fprintf(stderr, "sparkdap: control socket %s (sparkdap capture)\n", path)
	ready["control"] = path
	return func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		ctrl := make(chan error, 1)
		go func() { ctrl <- control.Serve(ctx, l, logger, backend) }()
		err := serve(ctx)
		cancel()
		if cerr := <-ctrl; err == nil {
			err = cerr
		}
		return err
	}, nil
}

// defaultCaptureDir is where captures go unless --capture-dir says:
// sparkdap/captures under the user's cache directory, else (no $HOME, no
// $XDG_CACHE_HOME) sparkdap-<uid>/captures under the shared temp
// directory (safefile.UserDir).
func defaultCaptureDir() string {
	base, name := safefile.UserDir()
	return filepath.Join(base, name, "captures")
}

// captureDirReady makes the capture directory at serve's start, and
// refuses to serve unless it is the user's alone: whoever else may write
// there could swap a capture that sparkdap replay then runs. The default
// is checked at every level sparkdap makes (sparkdap or sparkdap-<uid>,
// then captures), a --capture-dir itself and the directories made on the
// way. Each capture checks it again (capture.Run).
func captureDirReady(dir string) error {
	if dir == "" {
		return nil // no captures
	}
	base, name := safefile.UserDir()
	if filepath.Clean(dir) == filepath.Join(base, name, "captures") {
		_, err := safefile.MkdirPrivateIn(base, filepath.Join(name, "captures"))
		if err != nil {
			err = fmt.Errorf("capture directory: %w", safefile.WithFix(err, "set XDG_CACHE_HOME to a directory of your own, or give --capture-dir"))
		}
		return err
	}
	return flagError("capture-dir", safefile.WithFix(safefile.MkdirPrivate(dir), "give another --capture-dir"))
}
