package pycharm

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/capture"
)

// This file routes messages: PyCharm's commands to one executor or all
// (sequence numbers translated, breakpoint files rewritten), and from
// executors the events and answers PyCharm needs.

// noResponse lists the commands from PyCharm that pydevd never answers:
// nothing is kept waiting for them.
var noResponse = map[int]bool{
	CmdRun: true, CmdThreadSuspend: true, CmdThreadRun: true, 107: true, 108: true, 109: true, 144: true,
	CmdSetBreak: true, CmdRemoveBreak: true, CmdAddExceptionBreak: true, CmdRemoveExceptionBreak: true,
	CmdAddDjangoExceptionBreak: true, CmdRemoveDjangoExcBreak: true, CmdSetPyException: true,
	CmdSetPropertyTrace: true, CmdEnableDontTrace: true, CmdShowReturnValues: true, 140: true,
	CmdSetUnitTestDebugging: true, CmdRedirectOutput: true, CmdSetProjectRoots: true, CmdStopOnStart: true,
	119: true, 118: true, 127: true, 206: true,
}

// recordedByID are settings PyCharm sends once per session: the last of
// each is replayed to executors that join later.
var recordedByID = map[int]bool{
	CmdSetPyException: true, CmdSetPropertyTrace: true, CmdEnableDontTrace: true, CmdShowReturnValues: true,
	CmdStopOnStart: true, CmdPydevdJSONConfig: true, CmdSetUnitTestDebugging: true,
	CmdSetUserTypeRenderers: true, CmdRedirectOutput: true, CmdSetProjectRoots: true,
}

// answer is shared by the copies of one broadcast request: the first
// executor's response goes to PyCharm, the others are dropped.
type answer struct {
	done  bool
	timer *time.Timer
}

type request struct {
	ideSeq  int
	ans     *answer // broadcast: first answer wins
	swallow bool    // the proxy's own (replay, eval): never forwarded
	// reply gets the answer to the proxy's own request (eval), which
	// waits for it on no lock; buffered, so the sender never blocks.
	reply chan Message
}

// forward sends m to one executor under a fresh sequence number, noting
// what to do with the answer. Callers hold p.mu.
func (p *Proxy) forward(e *executor, m Message, r request) {
	e.seq += 2
	r.ideSeq = m.Seq
	m.Seq = e.seq
	if !noResponse[m.ID] {
		e.pending[m.Seq] = r
	}
	e.p.send(m)
}

// toExecutor forwards m with breakpoint files rewritten for e. Callers hold
// p.mu.
func (p *Proxy) toExecutor(e *executor, m Message, r request) {
	key, file, ok := BreakpointKey(m)
	if !ok {
		p.forward(e, m, r)
		return
	}
	var files []string
	if m.ID == CmdSetBreak {
		m = WithAnyFunction(m)
		files = e.paths.toRemote(file)
		e.bps[key] = files
	} else {
		if files = e.bps[key]; files == nil {
			files = e.paths.toRemote(file)
		}
		delete(e.bps, key)
	}
	for _, f := range files {
		p.forward(e, WithBreakpointFile(m, f), r)
	}
}

// fromPyCharm routes one command from PyCharm.
func (p *Proxy) fromPyCharm(ide *peer, m Message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ide != ide || p.st == nil {
		return
	}
	st := p.st
	p.log.Debug().Str("msg", m.String()).Msg("from PyCharm")
	switch {
	case m.ID == CmdVersion:
		ans := &answer{}
		st.version, st.versionAns = &m, ans
		for _, e := range p.execs {
			p.forward(e, m, request{ans: ans})
		}
		seq := m.Seq
		ans.timer = time.AfterFunc(p.cfg.VersionTimeout, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if ans.done || p.ide != ide {
				return
			}
			ans.done = true
			p.log.Info().Msg("no executor answered PyCharm's version request in time; the proxy answered it")
			ide.send(Message{ID: CmdVersion, Seq: seq, Payload: PyQuote(p.cfg.FallbackVersion, payloadSafe)})
		})
		return
	case m.ID == CmdSetProtocol:
		// Executors stay on pydevd's default quoted-line protocol: the
		// proxy answers for them.
		if strings.TrimSpace(m.Payload) != "quoted-line" {
			ide.send(ErrorMessage(m.Seq, "sparkdap: only the quoted-line protocol is supported"))
			return
		}
		ide.send(Message{ID: CmdSetProtocol, Seq: m.Seq})
		return
	case m.ID == CmdRun:
		st.run = true
	case m.ID == CmdSetBreak || m.ID == CmdRemoveBreak:
		if key, _, ok := BreakpointKey(m); ok {
			st.record("bp\t"+key, m, m.ID == CmdSetBreak)
		}
	case m.ID == CmdAddExceptionBreak || m.ID == CmdRemoveExceptionBreak:
		name, _, _ := strings.Cut(m.Payload, "\t")
		st.record("exc\t"+name, m, m.ID == CmdAddExceptionBreak)
	case m.ID == CmdAddDjangoExceptionBreak || m.ID == CmdRemoveDjangoExcBreak:
		name, _, _ := strings.Cut(m.Payload, "\t")
		st.record("django\t"+name, m, m.ID == CmdAddDjangoExceptionBreak)
	case recordedByID[m.ID]:
		st.record("cmd\t"+strconv.Itoa(m.ID), m, true)
	case m.ID == CmdConsoleExec:
		// thread\tframe\tscope\tline: a line of the Debug Console.
		f := strings.SplitN(m.Payload, "\t", 4)
		if len(f) == 4 && capture.IsConsoleCommand(f[3]) {
			p.consoleCommand(ide, m, f[0], f[1], f[3])
			return
		}
		fallthrough
	default:
		if thread, all := RoutedThread(m.Payload); thread != "" && !all {
			pid, _ := ThreadPID(thread)
			e := p.execs[pid]
			if e == nil {
				if !noResponse[m.ID] {
					ide.send(ErrorMessage(m.Seq, fmt.Sprintf("sparkdap: thread %s: its worker is gone", thread)))
				}
				return
			}
			p.noteAsked(e)
			p.forward(e, m, request{})
			return
		}
	}
	// Broadcast: every executor gets it; the first answer goes back.
	ans := &answer{}
	for _, e := range p.sortedExecs() {
		p.toExecutor(e, m, request{ans: ans})
	}
}

func (p *Proxy) sortedExecs() []*executor {
	out := make([]*executor, 0, len(p.execs))
	for _, e := range p.execs {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

// pycharmEvents are the command ids PyCharm's RemoteDebugger.processResponse
// dispatches as events whatever their sequence number: thread events,
// console output, CMD_EXIT, signature and concurrency logs, input requests,
// process creation and the Cython warning. Anything else is an answer, kept
// only if PyCharm waits for that sequence number.
var pycharmEvents = map[int]bool{
	CmdThreadCreate: true, CmdThreadKill: true, CmdThreadSuspend: true, CmdThreadRun: true,
	CmdShowConsole: true, CmdWriteToConsole: true, CmdExit: true, 130: true, 145: true,
	CmdInputRequested: true, CmdProcessCreated: true, CmdShowCythonWarning: true,
}

// forwardedEvents are the events an executor may send PyCharm unasked.
// Not CMD_EXIT: PyCharm tears down the whole session on it, every worker's
// (fireCommunicationError). Not PROCESS_CREATED, INPUT_REQUESTED, signature
// or concurrency logs: PyCharm's multi-process and console machinery, which
// the proxy's one connection does not stand for.
var forwardedEvents = map[int]bool{
	CmdThreadCreate: true, CmdThreadKill: true, CmdThreadSuspend: true, CmdThreadRun: true,
	CmdShowConsole: true, CmdWriteToConsole: true, CmdShowCythonWarning: true,
}

// fromExecutor relays one message from an executor's pydevd to PyCharm:
// the events PyCharm needs about e's own threads, and answers to requests
// PyCharm is waiting for. Everything else is dropped with a debug line.
// It returns PyCharm's peer if m was console output relayed to it, for
// the caller to pace on once p.mu is released (peer.pace); else nil.
func (p *Proxy) fromExecutor(e *executor, m Message) (paceOn *peer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.execs[e.pid] != e || p.ide == nil {
		return
	}
	if m.ID == CmdSendCurrExceptionTrace {
		e.noteExceptionTrace(m)
		return
	}
	if m.ID == CmdSparkdapTask {
		var t admission.TaskInfo
		if err := json.Unmarshal([]byte(PyUnquote(m.Payload)), &t); err == nil {
			t = t.Clean() // the cluster's words, shown to people
			if t.PID == 0 {
				t.PID = e.pid
			}
			old := e.label
			e.label = labelOf(t)
			e.hello.TaskInfo.Label = t.Label
			e.hello.TaskInfo.TaskAttemptID = t.TaskAttemptID
			if e.label != old {
				p.reannounce(e)
			}
		}
		return
	}
	drop := func(why string) {
		p.log.Debug().Int64("pid", e.pid).Str("msg", m.String()).Str("why", why).Msg("dropped a message from an executor")
	}
	if pycharmEvents[m.ID] {
		if !forwardedEvents[m.ID] {
			drop("PyCharm must not get this event from a worker")
			return
		}
		if !ownThreads(e, m) {
			drop("names a thread that is not this worker's")
			return
		}
		if p.hideOwnThread(e, m) || p.holdException(e, m) || e.resumedUnseen(m) {
			return
		}
		m.Seq = p.nextIDESeq()
	} else {
		r, ok := e.pending[m.Seq]
		if !ok || m.Seq%2 == 0 {
			drop("answers no request PyCharm is waiting for")
			return
		}
		delete(e.pending, m.Seq)
		if r.reply != nil {
			r.reply <- m
			return
		}
		if r.swallow {
			return
		}
		if r.ans != nil {
			if r.ans.done {
				return
			}
			r.ans.done = true
			if r.ans.timer != nil {
				r.ans.timer.Stop()
			}
		}
		m.Seq = r.ideSeq
	}
	return p.relay(e, m)
}

// relay sends PyCharm m from e, m.Seq already PyCharm's: thread names and
// frame files rewritten, stops noted. It returns PyCharm's peer if m was
// console output. Callers hold p.mu.
func (p *Proxy) relay(e *executor, m Message) (paceOn *peer) {
	switch m.ID {
	case CmdThreadCreate:
		for _, t := range ThreadList(m.Payload) {
			e.threads[t.ID] = t.Name
		}
	case CmdThreadKill:
		delete(e.threads, strings.TrimSpace(PyUnquote(m.Payload)))
	}
	m.Payload = RewriteFrameFiles(DropPlumbingFrames(m.Payload), e.paths.toLocal)
	if m.ID == CmdThreadCreate || m.ID == CmdReturn {
		m.Payload = PrefixThreadNames(m.Payload, e.label)
	}
	e.noteStop(m)
	if m.ID == CmdThreadSuspend {
		p.armMaxStop(e)
	}
	p.renewLeaseLocked(e)
	p.ide.send(m)
	if m.ID == CmdWriteToConsole {
		return p.ide
	}
	return nil
}
