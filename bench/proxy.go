package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/dap"
	"github.com/sparkdap/sparkdap/pathmap"
	"github.com/sparkdap/sparkdap/tunnel"
)

// The proxy under test runs in its own process, as `sparkdap serve` does, so
// its memory and CPU are not mixed with the load generators'. It is this
// same executable re-run with childEnv set: a dap.Hub configured the way
// cmd/sparkdap/serve.go configures it (token, path mapping under a root,
// default timeouts), with logging off, optionally fed by tunnel.Run in
// agent mode as `serve --ssh` does. It reads commands on stdin and answers
// each with one JSON line.

const (
	childEnv       = "SPARKDAP_BENCH_CHILD"
	childConfigEnv = "SPARKDAP_BENCH_CONFIG"
)

// ProxyConfig configures a proxy child.
type ProxyConfig struct {
	Token string `json:"token"`
	// Root enables path mapping under this directory, as serve --root.
	Root string `json:"root"`
	// Tunnel, when set, also carries executors through an SSH gateway.
	Tunnel *TunnelConfig `json:"tunnel,omitempty"`
	// RelayTo, when set, makes the child a byte relay to this address
	// instead of a proxy (relay.go); its listener is the ExecutorAddr.
	RelayTo string `json:"relayTo,omitempty"`
}

// TunnelConfig is serve --ssh … in agent mode.
type TunnelConfig struct {
	User, Host   string
	Port         int
	Identity     string
	KnownHosts   string
	RemoteListen string
	AgentPath    string
}

// Stats is the proxy's view of itself.
type Stats struct {
	RSS        int64  `json:"rss"`
	HeapAlloc  uint64 `json:"heapAlloc"`
	HeapInuse  uint64 `json:"heapInuse"`
	StackInuse uint64 `json:"stackInuse"`
	// HeapFree is heap memory free and still resident (HeapIdle −
	// HeapReleased): what RSS holds beyond HeapInuse until the runtime's
	// scavenger returns it to the OS.
	HeapFree uint64 `json:"heapFree"`
	// GCSys, MSpanSys and OtherSys are the runtime's own memory: GC
	// metadata, span structures, and the rest (MCacheSys, BuckHashSys and
	// OtherSys together).
	GCSys      uint64 `json:"gcSys"`
	MSpanSys   uint64 `json:"mspanSys"`
	OtherSys   uint64 `json:"otherSys"`
	Goroutines int    `json:"goroutines"`
	Executors  int    `json:"executors"`
}

// RunChildIfRequested runs the proxy child and exits if this process was
// started as one; otherwise it returns at once. Call it first thing in main
// and TestMain.
func RunChildIfRequested() {
	if os.Getenv(childEnv) != "proxy" {
		return
	}
	if err := runChild(); err != nil {
		fmt.Fprintln(os.Stderr, "proxy child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

type readyLine struct {
	IDE       string `json:"ide"`
	Executors string `json:"executors"`
	Tunnel    string `json:"tunnel,omitempty"`
}

func runChild() error {
	var cfg ProxyConfig
	if err := json.Unmarshal([]byte(os.Getenv(childConfigEnv)), &cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if cfg.RelayTo != "" {
		return runRelay(cfg.RelayTo)
	}
	// SPARKDAP_BENCH_PROFILE_DIR=dir profiles each proxy child (not the
	// byte relay), for looking into a number: cpu-PID.pprof for its whole
	// life, heap-PID.pprof and goroutine-PID.pprof at each forced-GC stats
	// reading (go tool pprof). A section starts several children (section
	// 1 one per path), so each has its own files.
	if dir := os.Getenv("SPARKDAP_BENCH_PROFILE_DIR"); dir != "" {
		// Every allocation sampled: an idle session holds a few KiB,
		// under the default rate's 512 KiB.
		runtime.MemProfileRate = 1
		out, err := os.Create(profilePath(dir, "cpu"))
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(out); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); out.Close() }()
	}
	var paths *pathmap.Mapper
	if cfg.Root != "" {
		var err error
		if paths, err = pathmap.New(cfg.Root, nil); err != nil {
			return err
		}
	}
	hub := dap.NewHub(dap.Config{Token: cfg.Token, Paths: paths, Log: zerolog.Nop()})
	srv, err := dap.Listen(hub, "127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	ready := readyLine{IDE: srv.IDEAddr().String(), Executors: srv.ExecutorAddr().String()}
	tunErr := make(chan error, 1)
	if t := cfg.Tunnel; t != nil {
		up := make(chan string, 1)
		go func() {
			tunErr <- tunnel.Run(ctx, tunnel.Config{
				Dial: tunnel.DialConfig{Target: tunnel.Target{User: t.User, Host: t.Host, Port: t.Port},
					IdentityFiles: []string{t.Identity}, KnownHostsFile: t.KnownHosts, Timeout: 20 * time.Second,
					Log: zerolog.Nop()},
				Mode: tunnel.ModeAgent, RemoteListen: t.RemoteListen, AgentPath: t.AgentPath,
				KeepaliveInterval: 15 * time.Second, MaxAttempts: 1,
				Handle: hub.ServeExecutor,
				OnUp: func(u tunnel.Up) {
					select {
					case up <- u.Addr:
					default:
					}
				},
				Log: zerolog.Nop(),
			})
		}()
		select {
		case ready.Tunnel = <-up:
		case err := <-tunErr:
			return fmt.Errorf("tunnel: %v", err)
		case <-time.After(60 * time.Second):
			return fmt.Errorf("tunnel not up within 60s")
		}
	}
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(ready); err != nil {
		return err
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch strings.TrimSpace(sc.Text()) {
		case "stats":
			_ = out.Encode(childStats(hub, false))
		case "gcstats":
			st := childStats(hub, true)
			if dir := os.Getenv("SPARKDAP_BENCH_PROFILE_DIR"); dir != "" {
				for _, name := range []string{"heap", "goroutine"} {
					if f, err := os.Create(profilePath(dir, name)); err == nil {
						_ = pprof.Lookup(name).WriteTo(f, 0)
						f.Close()
					}
				}
			}
			_ = out.Encode(st)
		default:
			_ = out.Encode(map[string]string{"error": "unknown command"})
		}
	}
	cancel()
	select {
	case <-served:
	case <-time.After(5 * time.Second):
	}
	return nil
}

// profilePath is where this proxy child writes its profile of kind.
func profilePath(dir, kind string) string {
	return filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", kind, os.Getpid()))
}

func childStats(hub *dap.Hub, gc bool) Stats {
	if gc {
		runtime.GC()
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return Stats{RSS: selfRSS(), HeapAlloc: ms.HeapAlloc, HeapInuse: ms.HeapInuse, StackInuse: ms.StackInuse,
		HeapFree: ms.HeapIdle - ms.HeapReleased, GCSys: ms.GCSys, MSpanSys: ms.MSpanSys,
		OtherSys:   ms.MCacheSys + ms.BuckHashSys + ms.OtherSys,
		Goroutines: runtime.NumGoroutine(), Executors: len(hub.Executors())}
}

// selfRSS is this process's resident set size in bytes (Linux), or -1.
func selfRSS() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return -1
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return -1
	}
	return pages * int64(os.Getpagesize())
}

// Proxy is a running proxy child.
type Proxy struct {
	IDEAddr      string
	ExecutorAddr string
	TunnelAddr   string

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	mu     sync.Mutex
	stderr *lockedBuffer
	waited chan error
	once   sync.Once
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 1<<20 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// StartProxy runs a proxy child and waits until it listens (and its tunnel
// is up, if configured).
func StartProxy(ctx context.Context, cfg ProxyConfig) (*Proxy, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(cfg)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"=proxy", childConfigEnv+"="+string(b))
	p := &Proxy{cmd: cmd, stderr: &lockedBuffer{}, waited: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.out = bufio.NewReader(stdout)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.waited <- cmd.Wait() }()
	type res struct {
		r   readyLine
		err error
	}
	ch := make(chan res, 1)
	go func() {
		var r readyLine
		line, err := p.out.ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(line, &r)
		}
		ch <- res{r, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			p.Close()
			return nil, fmt.Errorf("proxy child did not start: %v\n%s", r.err, p.stderr)
		}
		p.IDEAddr, p.ExecutorAddr, p.TunnelAddr = r.r.IDE, r.r.Executors, r.r.Tunnel
		return p, nil
	case <-ctx.Done():
		p.Close()
		return nil, fmt.Errorf("proxy child did not start: %w\n%s", ctx.Err(), p.stderr)
	}
}

// Stats asks the child for its numbers; gc forces two collections first.
func (p *Proxy) Stats(gc bool) (Stats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := "stats\n"
	if gc {
		cmd = "gcstats\n"
	}
	if _, err := io.WriteString(p.stdin, cmd); err != nil {
		return Stats{}, fmt.Errorf("proxy child: %w\n%s", err, p.stderr)
	}
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		return Stats{}, fmt.Errorf("proxy child: %w\n%s", err, p.stderr)
	}
	var s Stats
	err = json.Unmarshal(line, &s)
	return s, err
}

// WaitExecutors polls until the proxy has exactly n executors ready.
func (p *Proxy) WaitExecutors(ctx context.Context, n int) error {
	for {
		s, err := p.Stats(false)
		if err != nil {
			return err
		}
		if s.Executors == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("proxy has %d executors ready, want %d: %w", s.Executors, n, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// PID is the child's process id.
func (p *Proxy) PID() int { return p.cmd.Process.Pid }

// Close stops the child.
func (p *Proxy) Close() {
	p.once.Do(func() {
		p.stdin.Close()
		select {
		case <-p.waited:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.waited
		}
	})
}
