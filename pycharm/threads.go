package pycharm

import (
	"sort"
	"strings"

	"github.com/sparkdap/sparkdap/admission"
)

// This file keeps executors' threads as PyCharm sees them: named with
// their task label, only a worker's own, the wrapper's own kept out.

// ownThreadPrefix names the wrapper's own threads; the proxy keeps them out
// of PyCharm.
const ownThreadPrefix = "sparkdap-"

// labelOf is the thread-name prefix of an executor's task: the shared
// task label (admission.Label), as the DAP flavour's merged mode writes it.
func labelOf(t admission.TaskInfo) string {
	return "[" + admission.Label(t) + "] "
}

// eventThreads lists the threads a thread event names: the <thread>
// elements of create, suspend and show-console, the payload of kill, the
// first field of resume.
func eventThreads(m Message) []string {
	switch m.ID {
	case CmdThreadKill:
		return []string{strings.TrimSpace(PyUnquote(m.Payload))}
	case CmdThreadRun:
		id, _, _ := strings.Cut(PyUnquote(m.Payload), "\t")
		return []string{strings.TrimSpace(id)}
	case CmdThreadCreate, CmdThreadSuspend, CmdShowConsole:
		return ThreadIDs(m.Payload)
	}
	return nil
}

// ownThreads reports whether every thread an event names, and at least
// one, is e's: a worker must not announce, suspend or kill another's.
func ownThreads(e *executor, m Message) bool {
	switch m.ID {
	case CmdThreadCreate, CmdThreadKill, CmdThreadSuspend, CmdThreadRun, CmdShowConsole:
	default:
		return true // not a thread event
	}
	ids := eventThreads(m)
	if len(ids) == 0 {
		return false
	}
	for _, id := range ids {
		if pid, ok := ThreadPID(id); !ok || pid != e.pid {
			return false
		}
	}
	return true
}

// hideOwnThread keeps the wrapper's own threads (named "sparkdap-…", such
// as the connect guard) out of PyCharm: their events are dropped, and one
// suspended by a suspend-all policy or a pause is resumed at once, so it
// neither shows in PyCharm nor stays stopped inside remote_debug.py. It
// reports whether m was about such a thread. Callers hold p.mu.
func (p *Proxy) hideOwnThread(e *executor, m Message) bool {
	switch m.ID {
	case CmdThreadCreate:
		ts := ThreadList(m.Payload)
		if len(ts) == 0 || !strings.HasPrefix(ts[0].Name, ownThreadPrefix) {
			return false
		}
		for _, t := range ts {
			e.hidden[t.ID] = true
		}
		p.log.Debug().Int64("pid", e.pid).Str("thread", ts[0].ID).Msg("kept the wrapper's own thread out of PyCharm")
		return true
	case CmdThreadKill:
		id := eventThreads(m)[0]
		if !e.hidden[id] {
			return false
		}
		delete(e.hidden, id)
		return true
	case CmdThreadRun:
		return e.hidden[eventThreads(m)[0]]
	case CmdThreadSuspend, CmdShowConsole:
		ids := eventThreads(m)
		if !e.hidden[ids[0]] {
			return false
		}
		for _, id := range ids {
			p.forward(e, Message{ID: CmdThreadRun, Payload: id}, request{swallow: true})
		}
		p.log.Debug().Int64("pid", e.pid).Strs("threads", ids).Msg("resumed the wrapper's own thread")
		return true
	}
	return false
}

// reannounce tells PyCharm the new names of e's threads after its task
// changed: PyCharm takes a thread's name only from CMD_THREAD_CREATE, so a
// reused worker's thread would keep its first task's label. A repeated
// create replaces the thread's entry (RemoteDebugger keeps threads by id).
// Callers hold p.mu.
func (p *Proxy) reannounce(e *executor) {
	ids := make([]string, 0, len(e.threads))
	for id := range e.threads {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		p.ide.send(Message{ID: CmdThreadCreate, Seq: p.nextIDESeq(), Payload: ThreadCreatePayload(id, e.label+e.threads[id])})
	}
}
