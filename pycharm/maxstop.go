package pycharm

import (
	"fmt"
	"sort"
	"time"
)

// This file resumes a worker left stopped too long (Config.MaxStop): a
// developer who hit a breakpoint and went home must not hold the task
// overnight. The clock restarts with each stop and with each command from
// PyCharm routed to the worker (one naming its thread) or capture of it.

// armMaxStop starts e's clock at a stop, and its timer unless one runs.
// Callers hold p.mu.
func (p *Proxy) armMaxStop(e *executor) {
	if p.cfg.MaxStop <= 0 || len(e.stopped) == 0 {
		return
	}
	e.stopSince = p.now()
	if e.maxStop == nil {
		e.maxStop = time.AfterFunc(p.cfg.MaxStop, func() { p.checkMaxStop(e) })
	}
}

// noteAsked restarts e's clock: PyCharm asked something about it. Callers
// hold p.mu.
func (p *Proxy) noteAsked(e *executor) {
	if p.cfg.MaxStop > 0 {
		e.lastAsked = p.now()
	}
}

// stopMaxStop stops e's timer. Callers hold p.mu.
func (e *executor) stopMaxStop() {
	if e.maxStop != nil {
		e.maxStop.Stop()
		e.maxStop = nil
	}
}

// checkMaxStop runs on e's timer: it resumes e if it has been stopped for
// MaxStop with nothing asked about it since, else waits for the new
// deadline. A worker no longer stopped, or gone, lets the timer lapse.
func (p *Proxy) checkMaxStop(e *executor) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e.maxStop = nil
	if p.execs[e.pid] != e || p.ide == nil || len(e.stopped) == 0 {
		return
	}
	since := e.stopSince
	if e.lastAsked.After(since) {
		since = e.lastAsked
	}
	if left := p.cfg.MaxStop - p.now().Sub(since); left > 0 {
		e.maxStop = time.AfterFunc(left, func() { p.checkMaxStop(e) })
		return
	}
	p.maxStopExpired(e)
}

// maxStopExpired resumes e's stopped threads and says so: PyCharm's
// console gets a line naming the worker and why, then each thread's
// resume (resumeTold), and the log and serve's terminal get the line too.
// Callers hold p.mu; p.ide is set.
func (p *Proxy) maxStopExpired(e *executor) {
	stoppedFor := p.now().Sub(e.stopSince).Round(time.Second)
	why := fmt.Sprintf("worker %s pid %d (%s) resumed: stopped %s with no request from PyCharm about it (serve --max-stop %s)",
		e.hello.Host, e.pid, e.hello.Label, stoppedFor, p.cfg.MaxStop)
	p.ide.send(writeToConsole(p.nextIDESeq(), "sparkdap: "+why+"\n", "2"))
	p.resumeTold(e)
	p.log.Warn().Int64("pid", e.pid).Dur("stopped", stoppedFor).Dur("max_stop", p.cfg.MaxStop).
		Msg("worker stopped too long with no request from PyCharm; resumed it")
	p.summary("%s", why)
}

// resumeTold resumes e's stopped threads and tells PyCharm each one's
// resume (CMD_THREAD_RUN, as pydevd reports one): PyCharm did not ask
// for it. Callers hold p.mu; p.ide is set.
func (p *Proxy) resumeTold(e *executor) {
	ids := make([]string, 0, len(e.stopped))
	for id := range e.stopped {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		p.forward(e, Message{ID: CmdThreadRun, Payload: id}, request{swallow: true})
		p.ide.send(Message{ID: CmdThreadRun, Seq: p.nextIDESeq(), Payload: PyQuote(id+"\t-1", payloadSafe)})
		delete(e.stopped, id)
	}
}
