package pycharm

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sparkdap/sparkdap/capture"
)

// Commands of pydevd's line protocol the capture uses.
const (
	CmdEvaluateExpression = 113
	CmdConsoleExec        = 121
)

// defaultEvalTimeout bounds one of the proxy's own evaluates (Config.EvalTimeout).
const defaultEvalTimeout = 60 * time.Second

// ErrWorkerGone fails the proxy's own request when its worker is not (or
// no longer) connected.
var ErrWorkerGone = errors.New("the worker is not connected")

// ErrEvalTimeout fails the proxy's own request when pydevd does not answer
// in time.
var ErrEvalTimeout = errors.New("the worker's pydevd did not answer in time")

// evalVar is the one <var> of a CMD_EVALUATE_EXPRESSION answer.
type evalVar struct {
	Type    string `xml:"type,attr"`
	Value   string `xml:"value,attr"`
	ErrEval string `xml:"isErrorOnEval,attr"`
}

// evalValue reads the value of pydevd's answer to CMD_EVALUATE_EXPRESSION:
// the payload is URL-quoted XML whose <var value="…"> is XML-escaped and
// URL-quoted once more (pydevd_xml.var_to_xml). A str's value is its text
// (some pydevd versions put "str: " before it).
func evalValue(m Message) (string, error) {
	if m.ID == CmdError {
		return "", fmt.Errorf("pydevd: %s", truncate(strings.TrimSpace(PyUnquote(m.Payload)), 400))
	}
	var doc struct {
		Vars []evalVar `xml:"var"`
	}
	if err := xml.Unmarshal([]byte(PyUnquote(m.Payload)), &doc); err != nil || len(doc.Vars) == 0 {
		return "", fmt.Errorf("pydevd answered %.200q, not a value (%v)", m.Payload, err)
	}
	v := doc.Vars[0]
	val := PyUnquote(v.Value)
	if v.ErrEval == "True" {
		return "", fmt.Errorf("the expression failed in the worker: %s", truncate(val, 400))
	}
	if v.Type != "" {
		val = strings.TrimPrefix(val, v.Type+": ")
	}
	return val, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// eval evaluates expr in frame frame of thread thread of worker pid with
// the proxy's own CMD_EVALUATE_EXPRESSION, untrimmed (trim 0), and waits
// for its value. The request gets a sequence number of the proxy's
// (forward); its answer goes to this call, never to PyCharm. Takes p.mu
// only to send and to give up: never while waiting.
func (p *Proxy) eval(ctx context.Context, pid int64, thread, frame, expr string) (string, error) {
	ch := make(chan Message, 1)
	p.mu.Lock()
	e := p.execs[pid]
	if e == nil || p.ide == nil {
		p.mu.Unlock()
		return "", fmt.Errorf("worker pid %d: %w", pid, ErrWorkerGone)
	}
	p.forward(e, Message{ID: CmdEvaluateExpression, Payload: thread + "\t" + frame + "\tFRAME\t" + expr + "\t0"},
		request{swallow: true, reply: ch})
	seq := e.seq
	p.mu.Unlock()
	timeout := p.cfg.EvalTimeout
	if timeout <= 0 {
		timeout = defaultEvalTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	giveUp := func(err error) (string, error) {
		p.mu.Lock()
		if r, ok := e.pending[seq]; ok && r.reply == ch {
			delete(e.pending, seq)
		}
		p.mu.Unlock()
		return "", err
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return "", fmt.Errorf("worker pid %d: %w", pid, ErrWorkerGone)
		}
		return evalValue(m)
	case <-timer.C:
		return giveUp(fmt.Errorf("worker pid %d: %w (%v)", pid, ErrEvalTimeout, timeout))
	case <-ctx.Done():
		return giveUp(ctx.Err())
	}
}

// frameEvaluator is capture.Evaluator for one stopped frame.
type frameEvaluator struct {
	p             *Proxy
	pid           int64
	thread, frame string
}

func (f frameEvaluator) Eval(ctx context.Context, expr string) (string, error) {
	return f.p.eval(ctx, f.pid, f.thread, f.frame, expr)
}

// CaptureResult is a capture taken through the PyCharm proxy.
type CaptureResult struct {
	capture.Result
	PID     int64
	Summary string
}

// Capture captures frame (pydevd's id of it) of the stopped thread thread
// to the capture directory; maxBytes > 0 lowers Config.CaptureMaxBytes.
// It waits for the worker: call it on no lock.
func (p *Proxy) Capture(ctx context.Context, thread, frame string, maxBytes int64) (CaptureResult, error) {
	pid, ok := ThreadPID(thread)
	if !ok {
		return CaptureResult{}, fmt.Errorf("%w: %q is not a worker's thread", capture.ErrCapture, thread)
	}
	fid, err := strconv.ParseInt(frame, 10, 64)
	if err != nil {
		return CaptureResult{}, fmt.Errorf("%w: frame %q is not pydevd's frame id", capture.ErrCapture, frame)
	}
	limit := p.cfg.CaptureMaxBytes
	if limit <= 0 {
		limit = capture.DefaultMaxBytes
	}
	if maxBytes > 0 && maxBytes < int64(limit) {
		limit = int(maxBytes)
	}
	p.mu.Lock()
	e := p.execs[pid]
	var label string
	if e != nil {
		label = taskOf(e.label)
	}
	p.mu.Unlock()
	if e == nil {
		return CaptureResult{}, fmt.Errorf("%w: worker pid %d: %w", capture.ErrCapture, pid, ErrWorkerGone)
	}
	res, err := capture.Run(ctx, frameEvaluator{p, pid, thread, frame}, capture.Request{Frame: fid, MaxBytes: limit,
		Dir: p.cfg.CaptureDir, Executor: pid, Label: label, LocalFile: func(remote string) string { return p.localFile(e, remote) },
		LocalRoots: p.localRoots()})
	if err != nil {
		p.log.Info().Err(err).Int64("pid", pid).Msg("capture failed")
		return CaptureResult{}, err
	}
	p.log.Info().Str("path", res.Path).Int64("pid", pid).Msg("captured the stopped function and its arguments")
	return CaptureResult{Result: res, PID: pid, Summary: capture.Summary(res.Body())}, nil
}

// localFile is a capture's localFile: only what path mapping gives (a
// file under the roots, or a --map rule), never the executor's path as
// such, or a hostile executor would pick which file on this machine
// replay runs. Takes no lock.
func (p *Proxy) localFile(e *executor, remote string) string {
	if p.cfg.Paths == nil {
		return ""
	}
	return e.paths.mappedLocal(remote) // the Cache's own leaf lock
}

// localRoots is a capture's localRoots: the local project root path
// mapping maps executor code to. Takes no lock (cfg is fixed at start).
func (p *Proxy) localRoots() []string {
	if p.cfg.Paths == nil {
		return nil
	}
	return []string{p.cfg.Paths.Root()}
}

// consoleCommand serves a Debug Console line starting with
// capture.ConsolePrefix (CMD_CONSOLE_EXEC): it never reaches pydevd. The
// text goes to PyCharm's console as pydevd's output would
// (CMD_WRITE_TO_CONSOLE, stderr for a failure), then the command is
// answered as pydevd answers a complete line. A capture runs on a
// goroutine of its own. Callers hold p.mu.
func (p *Proxy) consoleCommand(ide *peer, m Message, thread, frame, line string) {
	reply := func(text string, failed bool) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.ide != ide || p.st == nil {
			return
		}
		ctx := "1"
		if failed {
			ctx = "2"
		}
		ide.send(writeToConsole(p.nextIDESeq(), text+"\n", ctx))
		ide.send(Message{ID: CmdEvaluateExpression, Seq: m.Seq, Payload: PyQuote(`<xml><var name="" type="bool" qualifier="builtins" value="False" />`+"\n"+
			`<var name="exception_occurred" type="bool" qualifier="builtins" value="False" />`+"\n</xml>", payloadSafe)})
	}
	if pid, ok := ThreadPID(thread); ok && p.execs[pid] != nil {
		p.noteAsked(p.execs[pid])
	}
	fields := strings.Fields(strings.TrimSpace(line))
	name := fields[0]
	switch name {
	case capture.ConsolePrefix + "help":
		go reply(capture.ConsoleHelp, false)
	case capture.ConsolePrefix + "capture":
		maxBytes, err := capture.ParseArgs(fields[1:])
		if err != nil {
			go reply(fmt.Sprintf("%s: %v (try !help)", name, err), true)
			return
		}
		go func() {
			res, err := p.Capture(context.Background(), thread, frame, maxBytes)
			if err != nil {
				reply(fmt.Sprintf("%s: %v", name, err), true)
				return
			}
			reply(res.Summary, false)
		}()
	default:
		go reply(fmt.Sprintf("%s is not a sparkdap command; !help lists them (Python never sees a line starting with %q)", name, capture.ConsolePrefix), true)
	}
}

// writeToConsole is the CMD_WRITE_TO_CONSOLE that shows text in PyCharm's
// console as pydevd shows a worker's output: ctx "1" stdout, "2" stderr.
func writeToConsole(seq int, text, ctx string) Message {
	io := `<xml><io s="` + xmlEscape(PyQuote(text, "/>_= ")) + `" ctx="` + ctx + `"/></xml>`
	return Message{ID: CmdWriteToConsole, Seq: seq, Payload: PyQuote(io, payloadSafe)}
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// taskOf is the task label inside a thread-name prefix (labelOf).
func taskOf(prefix string) string {
	return strings.TrimSuffix(strings.TrimPrefix(prefix, "["), "] ")
}
