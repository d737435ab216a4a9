package nvimdapclient

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/sparkdap/sparkdap/internal/dapclient"
)

// Thread is one entry of nvim-dap's thread table.
type Thread struct {
	ID      int
	Name    string
	Stopped bool
}

// Session is nvim-dap's state for one debug session. Its methods run on
// the test's goroutine only.
type Session struct {
	// ID is nvim-dap's session number, Name its configuration's name.
	ID   int
	Name string
	c    *dapclient.Client
	seen int // events of c handled so far

	threads map[int]*Thread
	dirty   bool
	stopped int // the thread nvim-dap jumped to; 0 for none
}

// New follows c as nvim-dap's session number id named name (the
// configuration's name: for a child session, the startDebugging
// configuration's).
func New(c *dapclient.Client, id int, name string) *Session {
	return &Session{ID: id, Name: name, c: c, threads: map[int]*Thread{}}
}

// Sync handles the events received so far, in order, making the requests
// nvim-dap makes for them.
func (s *Session) Sync(ctx context.Context) error {
	evs := s.c.Events()
	for ; s.seen < len(evs); s.seen++ {
		if err := s.handle(ctx, evs[s.seen]); err != nil {
			return err
		}
	}
	return nil
}

func (s *Session) handle(ctx context.Context, ev *dapclient.Event) error {
	var b struct {
		Reason              string `json:"reason"`
		ThreadID            *int   `json:"threadId"`
		AllThreadsContinued *bool  `json:"allThreadsContinued"`
	}
	if len(ev.Body) > 0 {
		if err := json.Unmarshal(ev.Body, &b); err != nil {
			return fmt.Errorf("nvimdapclient: %s event: %w", ev.Event, err)
		}
	}
	switch ev.Event {
	case "thread":
		if b.ThreadID == nil {
			return nil
		}
		id := *b.ThreadID
		switch t := s.threads[id]; {
		case b.Reason == "exited":
			delete(s.threads, id)
		case t != nil:
			t.Stopped = false
			if s.stopped == id {
				s.stopped = 0
			}
		default:
			s.dirty = true
			s.threads[id] = &Thread{ID: id, Name: "Unknown"}
		}
	case "stopped":
		if b.ThreadID == nil {
			return nil
		}
		id := *b.ThreadID
		if s.dirty || s.threads[id] == nil {
			s.threads[id] = &Thread{ID: id, Name: "Unknown", Stopped: true}
			if err := s.updateThreads(ctx); err != nil {
				return err
			}
		}
		t := s.threads[id]
		if t == nil {
			t = &Thread{ID: id, Name: "Unknown"}
			s.threads[id] = t
		}
		t.Stopped = true
		s.stopped = id
	case "continued":
		if b.AllThreadsContinued == nil || *b.AllThreadsContinued {
			for _, t := range s.threads {
				t.Stopped = false
			}
			s.stopped = 0
		} else if b.ThreadID != nil {
			if t := s.threads[*b.ThreadID]; t != nil {
				t.Stopped = false
			}
		}
	}
	return nil
}

// updateThreads is nvim-dap's threads request: the answer replaces the
// table, each thread it knew keeping its stopped flag.
func (s *Session) updateThreads(ctx context.Context) error {
	list, err := s.c.Threads(ctx)
	if err != nil {
		return fmt.Errorf("nvimdapclient: threads: %w", err)
	}
	next := make(map[int]*Thread, len(list))
	for _, th := range list {
		t := &Thread{ID: th.Id, Name: th.Name}
		if old := s.threads[th.Id]; old != nil {
			t.Stopped = old.Stopped
		}
		next[th.Id] = t
	}
	s.threads = next
	s.dirty = false
	return nil
}

// Thread is the thread table's entry for id, as held now (no request).
func (s *Session) Thread(id int) (Thread, bool) {
	t := s.threads[id]
	if t == nil {
		return Thread{}, false
	}
	return *t, true
}

// StoppedThread is the thread nvim-dap stopped at last, as held now.
func (s *Session) StoppedThread() (Thread, bool) { return s.Thread(s.stopped) }

// ThreadsWidget is what the threads widget lists when opened: the
// threads read again first if the table is stale.
func (s *Session) ThreadsWidget(ctx context.Context) ([]Thread, error) {
	if err := s.Sync(ctx); err != nil {
		return nil, err
	}
	if s.dirty {
		if err := s.updateThreads(ctx); err != nil {
			return nil, err
		}
	}
	out := make([]Thread, 0, len(s.threads))
	for _, t := range s.threads {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// SessionsLine is the sessions widget's line for this session.
func (s *Session) SessionsLine() string { return strconv.Itoa(s.ID) + ": " + s.Name }
