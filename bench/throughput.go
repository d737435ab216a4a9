package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sparkdap/sparkdap/internal/dapwire"
	"github.com/sparkdap/sparkdap/testkit/fakepydevd"
)

// ThroughputConfig sizes the output-throughput benchmark.
type ThroughputConfig struct {
	Executors  []int
	Bytes      int // output text per round, split among the executors
	EventBytes int // output text per event
	Rounds     int
	// SparkdapBin is uploaded as the tunnel's gateway agent; without it the
	// tunnel rows are skipped.
	SparkdapBin string
	Token       string
}

// rawIDE is a minimal DAP client that attaches in merged mode and then only
// counts output events, without keeping them.
//
// Ownership: the read goroutine sets err before it closes done; the
// counters are atomic.
type rawIDE struct {
	conn    net.Conn
	attach  attachWatch
	outputs atomic.Int64
	bytes   atomic.Int64
	changed chan struct{}
	done    chan struct{}
	err     error
}

// dialRawIDE connects to the proxy's IDE address and returns once the proxy
// has attached it as the root (merged) session.
func dialRawIDE(ctx context.Context, addr string) (*rawIDE, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	r := &rawIDE{conn: c, attach: newAttachWatch(), changed: make(chan struct{}, 1), done: make(chan struct{})}
	if err := sendMergedAttach(c); err != nil {
		c.Close()
		return nil, err
	}
	go r.read()
	if err := r.attach.wait(ctx, r.done, func() error { return r.err }); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// mergedAttach is what the bench's raw IDE clients send, all at once:
// initialize, attach without an executor (the root session, merged mode:
// no supportsStartDebuggingRequest) and configurationDone, seq 1 to 3.
var mergedAttach = []string{
	`{"seq":1,"type":"request","command":"initialize","arguments":{"clientID":"bench","adapterID":"debugpy","linesStartAt1":true,"columnsStartAt1":true,"pathFormat":"path"}}`,
	`{"seq":2,"type":"request","command":"attach","arguments":{"justMyCode":true}}`,
	`{"seq":3,"type":"request","command":"configurationDone","arguments":{}}`,
}

// configurationDoneSeq is mergedAttach's configurationDone.
const configurationDoneSeq = 3

func sendMergedAttach(c net.Conn) error {
	for _, m := range mergedAttach {
		if _, err := c.Write(dapwire.AppendFrame(nil, []byte(m))); err != nil {
			return err
		}
	}
	return nil
}

// attachWatch tells a raw IDE client when the proxy has answered its
// mergedAttach. Until then the session is not the proxy's root, and the
// proxy drops executors' events, output included, for want of an IDE to
// show them to (Hub.eventTargetLocked): a client that let its executors
// send before that lost their first events whenever the proxy's IDE
// connection was accepted after the executors' handshakes, which happens
// under CPU load (bench TestQuickSmoke's lost output events). The proxy
// serves one IDE connection's requests in order, so the answer to
// configurationDone means attach is done.
//
// Ownership: the client's reader goroutine calls see; anyone calls wait.
type attachWatch struct {
	answered chan struct{} // closed by see at configurationDone's answer
}

func newAttachWatch() attachWatch { return attachWatch{answered: make(chan struct{})} }

// see looks at one frame the reader got that is not an output event. A
// refused request of mergedAttach is an error, which ends the reader.
func (a attachWatch) see(body []byte) error {
	var m struct {
		Type       string `json:"type"`
		Command    string `json:"command"`
		RequestSeq int    `json:"request_seq"`
		Success    bool   `json:"success"`
		Message    string `json:"message"`
	}
	if json.Unmarshal(body, &m) != nil || m.Type != "response" || m.RequestSeq > configurationDoneSeq {
		return nil
	}
	select {
	case <-a.answered:
		return nil // attached already: not an answer to mergedAttach
	default:
	}
	if !m.Success {
		return fmt.Errorf("the proxy refused %s: %s", m.Command, m.Message)
	}
	if m.RequestSeq == configurationDoneSeq {
		close(a.answered)
	}
	return nil
}

// wait returns once mergedAttach is answered, or why it never will be:
// the reader ended (done closed; readErr is why) or ctx did.
func (a attachWatch) wait(ctx context.Context, done <-chan struct{}, readErr func() error) error {
	select {
	case <-a.answered:
		return nil
	case <-done:
		return fmt.Errorf("IDE connection ended before the proxy attached it: %w", readErr())
	case <-ctx.Done():
		return fmt.Errorf("the proxy did not attach the IDE: %w", ctx.Err())
	}
}

var outputMarker = []byte(`"event":"output"`)

func (r *rawIDE) read() {
	defer close(r.done)
	fr := dapwire.NewFrameReader(bufio.NewReaderSize(r.conn, 256<<10), 0)
	buf := make([]byte, 64<<10)
	for {
		var err error
		if buf, err = fr.ReadFrameInto(buf); err != nil {
			r.err = err
			return
		}
		if bytes.Contains(buf, outputMarker) {
			r.outputs.Add(1)
			r.bytes.Add(int64(len(buf)))
			select {
			case r.changed <- struct{}{}:
			default:
			}
		} else if err := r.attach.see(buf); err != nil {
			r.err = err
			return
		}
	}
}

func (r *rawIDE) waitOutputs(ctx context.Context, want int64) error {
	for r.outputs.Load() < want {
		select {
		case <-r.changed:
		case <-r.done:
			return fmt.Errorf("IDE connection ended after %d of %d output events: %v", r.outputs.Load(), want, r.err)
		case <-ctx.Done():
			return fmt.Errorf("%d of %d output events arrived: %w", r.outputs.Load(), want, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

func (r *rawIDE) close() { r.conn.Close(); <-r.done }

// outputText is n bytes of stdout-like text in 64-byte lines.
func outputText(n int) string {
	var sb strings.Builder
	for sb.Len() < n {
		line := fmt.Sprintf("row %08d processed: value=%d status=ok ", sb.Len()/64, sb.Len()*7)
		for len(line) < 63 {
			line += "."
		}
		sb.WriteString(line[:63] + "\n")
	}
	return sb.String()[:n]
}

type throughputPath struct {
	key, name, addr string
	mbps            map[int][]float64
}

// floodRound connects m fakes to addr, waits until the proxy has them, lets
// all of them send their share of the output at once and times until the
// IDE has every event. It returns MB/s of output text.
func floodRound(ctx context.Context, px *Proxy, ide *rawIDE, addr, token string, m int, cfg ThroughputConfig) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	swarm := &fakeSwarm{}
	defer func() {
		swarm.close()
		_ = px.WaitExecutors(ctx, 0)
	}()
	if err := swarm.grow(ctx, addr, token, "/job/udf.py", m, 32); err != nil {
		return 0, err
	}
	if err := px.WaitExecutors(ctx, m); err != nil {
		return 0, err
	}
	ev := fakepydevd.OutputEvent("stdout", outputText(cfg.EventBytes))
	perExec := max(1, cfg.Bytes/cfg.EventBytes/m)
	base := ide.outputs.Load()
	want := base + int64(perExec*m)
	start := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	for _, p := range swarm.peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perExec {
				if err := p.SendOutput(ev); err != nil {
					select {
					case errc <- err:
					default:
					}
					return
				}
			}
		}()
	}
	err := ide.waitOutputs(ctx, want)
	elapsed := time.Since(start)
	wg.Wait()
	if err != nil {
		return 0, err
	}
	select {
	case err := <-errc:
		return 0, err
	default:
	}
	return float64(perExec*m*ev.TextBytes()) / elapsed.Seconds() / 1e6, nil
}

// Throughput measures output events from executors to the IDE through the
// proxy, directly and through the two tunnels, interleaved round by round.
func Throughput(ctx context.Context, cfg ThroughputConfig, logf func(string, ...any)) (*Table, error) {
	t := &Table{Title: "4. Output throughput: executors' output events → proxy → IDE",
		Header: []string{"path", "executors", "rounds", "MB/s (median)", "÷ direct", "÷ OpenSSH ssh -L"}}
	pcfg := ProxyConfig{Token: cfg.Token}
	var g *gateway
	tunnelNote := ""
	if cfg.SparkdapBin != "" {
		var err error
		if g, err = startGateway(ctx); err != nil {
			tunnelNote = "tunnel rows skipped: " + err.Error()
		} else {
			defer g.close()
			port, err := freePort()
			if err != nil {
				return nil, err
			}
			pcfg.Tunnel = &TunnelConfig{User: g.User, Host: g.Host, Port: g.Port, Identity: g.ClientKey,
				KnownHosts: g.KnownHosts, RemoteListen: "127.0.0.1:" + strconv.Itoa(port), AgentPath: cfg.SparkdapBin}
		}
	} else {
		tunnelNote = "tunnel rows skipped: no -sparkdap binary given for the gateway agent"
	}
	px, err := StartProxy(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	defer px.Close()
	ide, err := dialRawIDE(ctx, px.IDEAddr)
	if err != nil {
		return nil, err
	}
	defer ide.close()
	paths := []*throughputPath{{key: "direct", name: "direct to the proxy", addr: px.ExecutorAddr}}
	if pcfg.Tunnel != nil {
		fwd, err := startSSHForward(ctx, g, px.ExecutorAddr, "aes128-gcm@openssh.com")
		if err != nil {
			return nil, err
		}
		defer fwd.close()
		paths = append(paths,
			&throughputPath{key: "tunnel", name: "sparkdap tunnel (agent + yamux over x/crypto/ssh)", addr: px.TunnelAddr},
			&throughputPath{key: "openssh", name: "OpenSSH `ssh -L` forward", addr: fwd.Addr})
	}
	for _, p := range paths {
		p.mbps = map[int][]float64{}
	}
	for _, m := range cfg.Executors {
		for r := range cfg.Rounds {
			for i := range paths {
				p := paths[(i+r)%len(paths)]
				v, err := floodRound(ctx, px, ide, p.addr, cfg.Token, m, cfg)
				if err != nil {
					return nil, fmt.Errorf("%s, %d executors: %w", p.name, m, err)
				}
				logf("throughput: %s, %d executors, round %d: %.1f MB/s", p.key, m, r+1, v)
				p.mbps[m] = append(p.mbps[m], v)
			}
		}
	}
	by := map[string]*throughputPath{}
	for _, p := range paths {
		by[p.key] = p
	}
	var worst float64 = -1
	for _, m := range cfg.Executors {
		for _, p := range paths {
			v := medianFloat(p.mbps[m])
			vs := ratio(v, medianFloat(by["direct"].mbps[m]))
			vo := "n/a"
			if o := by["openssh"]; o != nil {
				vo = ratio(v, medianFloat(o.mbps[m]))
				if p.key == "tunnel" {
					r := v / medianFloat(o.mbps[m])
					if worst < 0 || r < worst {
						worst = r
					}
				}
			}
			t.Add(p.name, strconv.Itoa(m), strconv.Itoa(len(p.mbps[m])), fmt.Sprintf("%.1f", v), vs, vo)
		}
	}
	if worst >= 0 {
		t.Note("goal tunnel ≥ 0.8× OpenSSH: worst %.2f× — %s", worst, goal(worst >= 0.8))
	}
	if tunnelNote != "" {
		t.Note("%s", tunnelNote)
	}
	t.Note("each round: %d MiB of output text in %d-byte events (64-byte lines), split evenly among the executors (fake pydevd peers in the bench process, sending as fast as the socket takes it); time from the first send to the IDE (merged mode: the proxy prefixes each line with the executor's label) holding every event; MB = 10⁶ bytes of output text", cfg.Bytes>>20, cfg.EventBytes)
	t.Note("both SSH paths use aes128-gcm@openssh.com to a real sshd on loopback; the tunnel's agent is the sparkdap binary run by sshd; sshd, ssh, the agent, the proxy and the senders all share the same CPUs, so these are CPU-bound rates")
	return t, nil
}
