package pycharm

import (
	"encoding/xml"
	"fmt"
	"html"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/selection"
)

// Stops at exceptions, grouped across workers, as the DAP front end does
// (dap/exceptions.go): the first stop of each exception type at each
// place is shown; the others are held from PyCharm for
// Config.ExceptionHold, counted in the Board's groups, then resumed so
// the exception goes on to Spark. pydevd's suspend names the exception
// breakpoint, not what was raised (its message is the breakpoint's
// qname: BaseException under PyCharm's "Any exception"); the type comes
// from the CMD_SEND_CURR_EXCEPTION_TRACE pydevd sends just before.

// heldException is a suspend at an exception held from PyCharm.
type heldException struct {
	m          Message
	typ, place string
	task       int64 // task attempt id, -1 when unknown
	timer      *time.Timer
}

// exceptionSuspend is what a suspend's XML says of an exception stop.
type exceptionSuspend struct {
	Threads []struct {
		ID         string `xml:"id,attr"`
		StopReason string `xml:"stop_reason,attr"`
		Message    string `xml:"message,attr"`
		Frames     []struct {
			File string `xml:"file,attr"`
			Line string `xml:"line,attr"`
		} `xml:"frame"`
	} `xml:"thread"`
}

// noteExceptionTrace keeps the type pydevd says was raised on a thread:
// "<frame id>\t<type>\t<description>\t<suspend xml>". Callers hold p.mu.
func (e *executor) noteExceptionTrace(m Message) {
	parts := strings.SplitN(PyUnquote(m.Payload), "\t", 4)
	if len(parts) < 4 {
		return
	}
	var d exceptionSuspend
	if xml.Unmarshal([]byte(parts[3]), &d) != nil || len(d.Threads) == 0 {
		return
	}
	if e.raised == nil {
		e.raised = map[string]string{}
	}
	if len(e.raised) < maxThreadsPerWorker {
		e.raised[d.Threads[0].ID] = admission.Clean(exceptionTypeName(parts[1]), admission.MaxTextRunes)
	}
}

// classRepr is how pydevd names the raised type: the class's repr,
// XML-escaped ("&lt;class 'KeyError'&gt;").
var classRepr = regexp.MustCompile(`^<class '([^']+)'>$`)

// exceptionTypeName is the raised type's name as the DAP front end gets
// it from pydevd (KeyError, mypkg.MyError): builtins' without a module.
func exceptionTypeName(field string) string {
	s := strings.TrimSpace(html.UnescapeString(PyUnquote(field)))
	if m := classRepr.FindStringSubmatch(s); m != nil {
		s = m[1]
	}
	return strings.TrimPrefix(s, "builtins.")
}

// maxThreadsPerWorker bounds what the proxy keeps per worker thread.
const maxThreadsPerWorker = 1024

// holdException holds a suspend at an exception whose group PyCharm has
// been shown a stop of already, and reports whether it did. Callers hold
// p.mu.
func (p *Proxy) holdException(e *executor, m Message) bool {
	if m.ID != CmdThreadSuspend {
		return false
	}
	var d exceptionSuspend
	if xml.Unmarshal([]byte(PyUnquote(m.Payload)), &d) != nil || len(d.Threads) != 1 {
		return false
	}
	t := d.Threads[0]
	if t.StopReason != strconv.Itoa(CmdStepCaughtException) && t.StopReason != strconv.Itoa(CmdAddExceptionBreak) {
		return false
	}
	typ := e.raised[t.ID]
	delete(e.raised, t.ID)
	if len(t.Frames) > 0 && admission.IsPlumbingFile(PyUnquote(t.Frames[0].File)) {
		// Raised in the wrapper or PySpark's daemon (the worker's own
		// SystemExit as it ends): never the user's, never shown.
		p.resumeUnseen(e, t.ID)
		return true
	}
	if typ == "" {
		typ = admission.Clean(PyUnquote(t.Message), admission.MaxTextRunes)
	}
	if typ == "" {
		typ = "an exception"
	}
	place := "an unknown place"
	if len(t.Frames) > 0 {
		place = admission.Clean(fmt.Sprintf("%s:%s", path.Base(PyUnquote(t.Frames[0].File)), t.Frames[0].Line), admission.MaxTextRunes)
	}
	task := int64(-1)
	if id := e.hello.TaskAttemptID; id != nil {
		task = *id
	}
	if p.board.Raised(typ, place, task) {
		return false
	}
	if e.heldExc == nil {
		e.heldExc = map[string]*heldException{}
	}
	he := &heldException{m: m, typ: typ, place: place, task: task}
	tid := t.ID
	he.timer = time.AfterFunc(p.cfg.ExceptionHold, func() { p.releaseException(e, tid, false) })
	e.heldExc[tid] = he
	p.log.Debug().Int64("pid", e.pid).Str("exception", typ).Str("place", place).
		Msg("held a stop at an exception PyCharm was shown a stop of already")
	return true
}

// releaseException ends the hold of thread tid's stop: shown to PyCharm,
// or resumed unseen so the exception goes on. It reports whether one was
// held.
func (p *Proxy) releaseException(e *executor, tid string, show bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	he := e.heldExc[tid]
	if he == nil {
		return false
	}
	delete(e.heldExc, tid)
	he.timer.Stop()
	p.board.Unhold(he.typ, he.place)
	if p.execs[e.pid] != e {
		return true // gone
	}
	if show && p.ide != nil {
		m := he.m
		m.Seq = p.nextIDESeq()
		p.relay(e, m)
		return true
	}
	p.resumeUnseen(e, tid)
	return true
}

// resumeUnseen resumes thread tid, whose stop PyCharm never saw; its
// resume is kept from PyCharm too (resumedUnseen). Callers hold p.mu.
func (p *Proxy) resumeUnseen(e *executor, tid string) {
	if e.unseen == nil {
		e.unseen = map[string]bool{}
	}
	if len(e.unseen) < maxThreadsPerWorker {
		e.unseen[tid] = true
	}
	p.forward(e, Message{ID: CmdThreadRun, Payload: tid}, request{swallow: true})
}

// resumedUnseen drops pydevd's resume of a thread whose stop PyCharm never
// saw, and reports whether it did. Callers hold p.mu.
func (e *executor) resumedUnseen(m Message) bool {
	if m.ID != CmdThreadRun {
		return false
	}
	id := eventThreads(m)[0]
	if !e.unseen[id] {
		return false
	}
	delete(e.unseen, id)
	return true
}

// showWantedException shows the held stop of the task taskAttempt, if a
// worker holds one (the Board's OnWant).
func (p *Proxy) showWantedException(taskAttempt int64) bool {
	p.mu.Lock()
	var e *executor
	var tid string
	for _, x := range p.execs {
		for id, he := range x.heldExc {
			if he.task == taskAttempt {
				e, tid = x, id
			}
		}
	}
	p.mu.Unlock()
	return e != nil && p.releaseException(e, tid, true)
}

// workerChanged names a connected worker's threads after what it does
// between debugged tasks, as its watch connection reported (the Board's
// OnChange): without it they would keep naming the task it debugged last
// while it is idle or runs tasks that are not debugged. Its next
// CMD_SPARKDAP_TASK names its next debugged task.
func (p *Proxy) workerChanged(w selection.Worker) {
	between := selection.Between(w)
	if between == "" {
		return // a debugged task: its sparkdapTask names it
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.execs[w.PID]
	if e == nil || e.hello.Host != w.Host || len(e.stopped) > 0 || p.ide == nil {
		return
	}
	t := e.hello.TaskInfo
	t.PID = e.pid
	t.Label = between
	if label := labelOf(t); label != e.label {
		e.label = label
		p.reannounce(e)
	}
}
