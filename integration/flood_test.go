package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/internal/testenv"
	"github.com/sparkdap/sparkdap/workerwrap"
)

// plainBinary is sparkdap built without the race detector, whose memory
// is the product's own: what a flood costs serve is measured on it.
func plainBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sparkdap")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/sparkdap/sparkdap/cmd/sparkdap")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sparkdap: %v\n%s", err, out)
	}
	return bin
}

// flood is a peer without the token holding n connections open to addr,
// spread over the source addresses srcs: idle ones send nothing, slow ones
// start a hello and then send a byte every half second, never finishing
// it. Each connection the proxy closes is opened again at once, as an
// attacker would, at most maxReopen times per connection and until stop.
type flood struct {
	opened, reopened atomic.Int64
	stop             chan struct{}
	wg               sync.WaitGroup
}

const maxReopen = 400

func startFlood(t *testing.T, addr string, srcs []string, n int, slow bool) *flood {
	t.Helper()
	f := &flood{stop: make(chan struct{})}
	var ready sync.WaitGroup
	for i := range n {
		ready.Add(1)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			first := true
			src := &net.TCPAddr{IP: net.ParseIP(srcs[i%len(srcs)])}
			for k := 0; k < maxReopen; k++ {
				select {
				case <-f.stop:
					if first {
						ready.Done()
					}
					return
				default:
				}
				d := net.Dialer{LocalAddr: src, Timeout: 5 * time.Second}
				c, err := d.Dial("tcp", addr)
				if first {
					ready.Done()
					first = false
				}
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				if k == 0 {
					f.opened.Add(1)
				} else {
					f.reopened.Add(1)
				}
				hold(c, slow, f.stop)
			}
		}()
	}
	ready.Wait()
	t.Cleanup(f.end)
	return f
}

// hold keeps c open until the proxy closes it or stop is closed.
func hold(c net.Conn, slow bool, stop chan struct{}) {
	defer c.Close()
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, c)
		close(closed)
	}()
	var tick <-chan time.Time
	if slow {
		_, _ = c.Write([]byte("SPARKDAP/2 HEL"))
		tk := time.NewTicker(500 * time.Millisecond)
		defer tk.Stop()
		tick = tk.C
	}
	for {
		select {
		case <-closed:
			return
		case <-stop:
			return
		case <-tick:
			_, _ = c.Write([]byte("L"))
		}
	}
}

func (f *flood) end() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	f.wg.Wait()
}

// rssKiB is a process's resident memory.
func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// probeWorker runs the wrapper's own test worker (doctor's: its hello
// client, then a real debugpy.connect) against the executor port and
// waits until debugpy.connect returned, that is until the proxy admitted
// it, or fails the test with what the worker said.
func probeWorker(t *testing.T, ctx context.Context, executors, token string) time.Duration {
	t.Helper()
	host, port, err := net.SplitHostPort(executors)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, python(t), workerwrap.ProbeArgs(host, port)...)
	cmd.Env = append(os.Environ(), "PYDEVD_DISABLE_FILE_VALIDATION=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	if _, err := io.WriteString(stdin, token+"\n"); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		t.Fatalf("the test worker said nothing; stderr:\n%s", stderr.String())
	}
	if line := sc.Text(); !strings.HasPrefix(line, "CONNECTED ") {
		t.Fatalf("the test worker was not admitted: %q; stderr:\n%s", line, stderr.String())
	}
	return time.Since(start)
}

// attachWithToken attaches an IDE with serve's IDE token and returns how
// long it took.
func attachWithToken(t *testing.T, ctx context.Context, addr, ideToken string) time.Duration {
	t.Helper()
	start := time.Now()
	ide := dialIDE(t, ctx, addr)
	defer ide.Close()
	if _, err := ide.Initialize(ctx, false); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if err := ide.Attach(ctx, map[string]any{"sparkdapToken": ideToken}, nil); err != nil {
		t.Fatalf("attach with the IDE token: %v", err)
	}
	return time.Since(start)
}

// TestFloodsShutOutNoWorkerAndNoIDE: a peer without a token floods serve's
// executor port, and then its IDE port, with 260, 1,100 and 5,000 idle or
// slow connections, from the workers' own address and from five, and
// opens again each one the proxy closes. Under each flood a real worker
// (the wrapper's hello, then debugpy.connect) is admitted within its
// connect timeout, an IDE with the IDE token attaches, and serve's
// resident memory stays within 64 MiB of what it was before the floods.
func TestFloodsShutOutNoWorkerAndNoIDE(t *testing.T) {
	testenv.SkipIfShort(t, "opens thousands of connections to a real sparkdap serve")
	ctx := testContext(t, 15*time.Minute)
	const ideToken = "ide-token-0123456789abcdef0123456789"
	bin := plainBinary(t)
	ready := filepath.Join(t.TempDir(), "ready.json")
	var log strings.Builder
	var logMu sync.Mutex
	cmd := exec.Command(bin, "serve", "--ide", "127.0.0.1:0", "--executors", "127.0.0.1:0",
		"--token", testToken, "--ide-token", ideToken, "--ready-file", ready)
	w := &lockedWriter{w: &log, mu: &logMu}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			logMu.Lock()
			t.Logf("sparkdap serve:\n%s", tail(log.String(), 6000))
			logMu.Unlock()
		}
	})
	var ports struct{ IDE, Executors string }
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if data, err := os.ReadFile(ready); err == nil {
			if err := json.Unmarshal(data, &ports); err == nil && ports.IDE != "" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("sparkdap serve never became ready")
		}
	}
	// A first worker and IDE, before any flood: the imports are warm and
	// the baseline memory holds what serving them costs.
	probeWorker(t, ctx, ports.Executors, testToken)
	attachWithToken(t, ctx, ports.IDE, ideToken)
	base := rssKiB(t, cmd.Process.Pid)
	var peak int64

	one := []string{"127.0.0.1"}
	five := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}
	for _, port := range []string{"executor", "IDE"} {
		for _, tc := range []struct {
			n    int
			slow bool
			srcs []string
		}{
			{260, false, one}, {1100, false, one}, {5000, false, one},
			{260, true, one}, {1100, true, one}, {5000, true, one},
			{1100, false, five}, {5000, false, five}, {5000, true, five},
		} {
			kind := "idle"
			if tc.slow {
				kind = "slow"
			}
			name := fmt.Sprintf("%s port, %d %s from %d addresses", port, tc.n, kind, len(tc.srcs))
			addr := ports.Executors
			if port == "IDE" {
				addr = ports.IDE
			}
			f := startFlood(t, addr, tc.srcs, tc.n, tc.slow)
			if rss := rssKiB(t, cmd.Process.Pid); rss > peak {
				peak = rss
			}
			admitted := probeWorker(t, ctx, ports.Executors, testToken)
			attached := attachWithToken(t, ctx, ports.IDE, ideToken)
			if rss := rssKiB(t, cmd.Process.Pid); rss > peak {
				peak = rss
			}
			t.Logf("%s: worker admitted in %s, IDE attached in %s; flood opened %d, reopened %d",
				name, admitted.Round(time.Millisecond), attached.Round(time.Millisecond), f.opened.Load(), f.reopened.Load())
			f.end()
		}
	}
	t.Logf("serve's resident memory: %d KiB before the floods, %d KiB at their peak (+%d KiB)", base, peak, peak-base)
	if peak-base > 64*1024 {
		t.Errorf("serve's resident memory grew by %d KiB under the floods, over 64 MiB", peak-base)
	}
}

// lockedWriter serialises writes to w under mu.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// helloStorm has n workers say hello to addr at once from one address,
// as a wide stage's workers behind one NAT or the tunnel do, and returns
// how many the proxy admitted and the first few other outcomes.
func helloStorm(t *testing.T, ctx context.Context, addr string, n int) (admitted int, other []string) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}, Timeout: 30 * time.Second}
			c, err := d.DialContext(ctx, "tcp", addr)
			outcome := ""
			if err == nil {
				_ = c.SetDeadline(time.Now().Add(60 * time.Second))
				var reply string
				reply, _, err = admission.Introduce(c, testToken, admission.TaskInfo{PID: int64(100000 + i), Host: "storm",
					ExecutorID: "1", Label: fmt.Sprintf("storm %d", i)})
				c.Close()
				if err == nil && reply != "OK" && !strings.HasPrefix(reply, "OK ") {
					outcome = reply
				}
			}
			if err != nil {
				outcome = err.Error()
			}
			mu.Lock()
			defer mu.Unlock()
			if outcome == "" {
				admitted++
			} else if len(other) < 5 {
				other = append(other, outcome)
			}
		}()
	}
	close(start)
	wg.Wait()
	return admitted, other
}

// TestThousandWorkersAtOnceFromOneAddress: 1,000 workers whose hellos
// reach serve at the same moment from one address are all admitted, on
// the executor port and through `serve --ssh`'s agent, where every
// connection comes from the gateway's one address.
func TestThousandWorkersAtOnceFromOneAddress(t *testing.T) {
	testenv.SkipIfShort(t, "starts serve and sshd")
	ctx := testContext(t, 5*time.Minute)
	const n = 1000
	t.Run("direct", func(t *testing.T) {
		p := startProxy(t, ctx, "--log-level", "info")
		admitted, other := helloStorm(t, ctx, p.Executors, n)
		if admitted != n {
			t.Errorf("%d of %d workers admitted; others: %q", admitted, n, other)
		}
	})
	t.Run("serve --ssh", func(t *testing.T) {
		g := startGateway(t, ctx, "127.0.0.1")
		remote := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t, "127.0.0.1")))
		p := tunnelProxy(t, ctx, g, remote, "--agent-path", sparkdapBinary(t), "--log-level", "info")
		admitted, other := helloStorm(t, ctx, remote, n)
		if admitted != n {
			t.Errorf("%d of %d workers admitted through the tunnel; others: %q", admitted, n, other)
		}
		_ = p
	})
}
