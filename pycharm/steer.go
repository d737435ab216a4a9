package pycharm

import (
	"context"
	"fmt"
	"sort"

	"github.com/sparkdap/sparkdap/control"
)

// The Proxy steers workers for the control protocol as far as PyCharm's
// one session lets it (control.Steerer): it resumes a stopped worker, or
// all of them, as the MaxStop clock does, telling PyCharm each thread's
// resume. Pausing one worker and detaching one are not done: PyCharm
// shows every worker as threads of one debuggee and has no way to be
// told that one of them left, so they answer control.ErrUnsupported.

var (
	_ control.Steerer       = (*Proxy)(nil)
	_ control.SessionLister = (*Proxy)(nil)
)

// Continue resumes the stopped worker of pid pid, every stopped thread
// of it (control.Steerer).
func (p *Proxy) Continue(_ context.Context, pid uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.execs[int64(pid)]
	switch {
	case e == nil:
		return control.WithClass(fmt.Errorf("worker pid %d: %w", pid, ErrWorkerGone), control.ErrUnknownExecutor)
	case len(e.stopped) == 0 || p.ide == nil:
		return fmt.Errorf("worker pid %d: %w", pid, ErrNotStopped)
	}
	p.resumeTold(e)
	return nil
}

// ContinueAll resumes every stopped worker and says how many
// (control.Steerer).
func (p *Proxy) ContinueAll(context.Context) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ide == nil {
		return 0, nil
	}
	pids := make([]int64, 0, len(p.execs))
	for pid, e := range p.execs {
		if len(e.stopped) > 0 {
			pids = append(pids, pid)
		}
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	for _, pid := range pids {
		p.resumeTold(p.execs[pid])
	}
	return len(pids), nil
}

// Pause is not done in PyCharm mode: pause the worker's thread in
// PyCharm's Threads view (control.Steerer).
func (p *Proxy) Pause(context.Context, uint64) error {
	return fmt.Errorf("pause: %w: in PyCharm, pause the worker's thread in the Threads view", control.ErrUnsupported)
}

// Detach is not done in PyCharm mode: PyCharm shows every worker in one
// session and has no way to be told one left (control.Steerer).
func (p *Proxy) Detach(context.Context, uint64) error {
	return fmt.Errorf("detach: %w: PyCharm shows every worker in one session", control.ErrUnsupported)
}

// Sessions is each joined worker's pid, by its host and pid
// (control.SessionLister).
func (p *Proxy) Sessions() map[control.WorkerID]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[control.WorkerID]uint64, len(p.execs))
	for pid, e := range p.execs {
		out[control.WorkerID{Host: e.hello.Host, PID: pid}] = uint64(pid)
	}
	return out
}
