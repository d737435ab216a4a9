package dap

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	godap "github.com/google/go-dap"

	"github.com/sparkdap/sparkdap/internal/dapclient"
	"github.com/sparkdap/sparkdap/testkit/fakepydevd"
)

// threadNames lists the merged threads answer as "id name" strings.
func threadNames(t *testing.T, ctx context.Context, c *dapclient.Client) map[int]string {
	t.Helper()
	threads, err := c.Threads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, th := range threads {
		if _, dup := out[th.Id]; dup {
			t.Fatalf("thread id %d listed twice: %+v", th.Id, threads)
		}
		out[th.Id] = th.Name
	}
	return out
}

// threadRequests is how many threads requests each fake has had.
func threadRequests(fs ...*fakePydevd) []int64 {
	out := make([]int64, len(fs))
	for i, f := range fs {
		out[i] = f.Count("threads")
	}
	return out
}

// waitThreadEvent waits for the IDE to get a thread event with reason.
func waitThreadEvent(t *testing.T, ctx context.Context, c *dapclient.Client, reason string) godap.ThreadEventBody {
	t.Helper()
	ev, err := c.WaitEvent(ctx, "thread", func(b json.RawMessage) bool {
		var body godap.ThreadEventBody
		return json.Unmarshal(b, &body) == nil && body.Reason == reason
	})
	if err != nil {
		t.Fatal(err)
	}
	var body godap.ThreadEventBody
	_ = ev.Decode(&body)
	return body
}

// TestMergedThreadsNoRoundTripWhenKnown: a client that refreshes threads
// and the stopped thread's stack on every stopped event (nvim-dap, VS Code)
// costs each executor one threads request in all, not one per stop.
func TestMergedThreadsNoRoundTripWhenKnown(t *testing.T) {
	for _, n := range []int{1, 4} {
		t.Run(fmt.Sprintf("%d executors", n), func(t *testing.T) {
			p := startProxy(t, nil)
			c := p.ide(false, nil)
			var fs []*fakePydevd
			for i := range n {
				fs = append(fs, p.executor(500+i, nil))
			}
			for i, f := range fs {
				f.stop()
				tid := stoppedOn(p.ctx, t, c)
				names := threadNames(t, p.ctx, c)
				if len(names) != n || !strings.Contains(names[tid], fmt.Sprintf("pid %d] MainThread", 500+i)) {
					t.Fatalf("after stop %d: threads %v; want %d, the stopped one %d named after pid %d", i, names, n, tid, 500+i)
				}
				if frames, err := c.StackTrace(p.ctx, tid); err != nil || len(frames) != 1 {
					t.Fatalf("stackTrace of stopped thread %d: %v, %v", tid, frames, err)
				}
			}
			for i, got := range threadRequests(fs...) {
				if got != 1 {
					t.Errorf("executor %d got %d threads requests for %d stops; want 1 (its first list, then the proxy's)", i, got, n)
				}
			}
		})
	}
}

// TestMergedThreadsFollowEvents: threads that start and exit, and an
// executor that leaves, show in the merged list; only the executor whose
// list changed by a start is asked again.
func TestMergedThreadsFollowEvents(t *testing.T) {
	p := startProxy(t, nil)
	c := p.ide(false, nil)
	a, b := p.executor(601, nil), p.executor(602, nil)
	if names := threadNames(t, p.ctx, c); len(names) != 2 {
		t.Fatalf("threads %v, want 2", names)
	}
	steps := []struct {
		name     string
		do       func()
		reason   string // thread event the IDE gets
		want     []string
		requests []int64 // threads requests a and b have had after it
	}{
		{"a starts a thread", func() { _ = a.StartThread(7, "Worker-7") }, "started",
			[]string{"pid 601] MainThread", "pid 601] Worker-7", "pid 602] MainThread"}, []int64{2, 1}},
		{"a's thread exits", func() { _ = a.ExitThread(7) }, "exited",
			[]string{"pid 601] MainThread", "pid 602] MainThread"}, []int64{2, 1}},
		{"b starts two", func() { _ = b.StartThread(9, "w9"); _ = b.StartThread(11, "w11") }, "started",
			[]string{"pid 601] MainThread", "pid 602] MainThread", "pid 602] w9", "pid 602] w11"}, []int64{2, 2}},
		{"a leaves", func() { a.Close() }, "exited",
			[]string{"pid 602] MainThread", "pid 602] w9", "pid 602] w11"}, []int64{2, 2}},
	}
	for _, st := range steps {
		st.do()
		waitThreadEvent(t, p.ctx, c, st.reason)
		if st.name == "b starts two" {
			waitThreadEvent(t, p.ctx, c, st.reason)
		}
		if st.name == "a leaves" {
			p.waitExecutors(1)
		}
		names := threadNames(t, p.ctx, c)
		var got []string
		for _, n := range names {
			got = append(got, n[strings.Index(n, "pid "):])
		}
		slices.Sort(got)
		want := slices.Clone(st.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: threads %q, want %q", st.name, got, want)
		}
		// Asking again costs no round trip.
		threadNames(t, p.ctx, c)
		if got := threadRequests(a, b); !slices.Equal(got, st.requests) {
			t.Fatalf("%s: threads requests to a, b = %v, want %v", st.name, got, st.requests)
		}
	}
}

// TestMergedThreadsCoalesce: threads requests that arrive while executors'
// lists are being fetched share one request per executor.
func TestMergedThreadsCoalesce(t *testing.T) {
	p := startProxy(t, nil)
	c := p.ide(false, nil)
	release := make(chan struct{})
	var fs []*fakePydevd
	for i := range 3 {
		f := p.executor(700+i, nil)
		f.SetTamper(func(req fakepydevd.Message, _ map[string]any) {
			if req.Command == "threads" {
				select {
				case <-release:
				case <-time.After(30 * time.Second):
				}
			}
		})
		fs = append(fs, f)
	}
	var pend []*dapclient.Pending
	for range 5 {
		pd, err := c.Send(p.ctx, "threads", nil)
		if err != nil {
			t.Fatal(err)
		}
		pend = append(pend, pd)
	}
	// The proxy answers loadedSources itself, in order: once it has, it
	// has taken in every threads request before it.
	if _, err := c.Request(p.ctx, "loadedSources", nil); err != nil {
		t.Fatal(err)
	}
	close(release)
	for i, pd := range pend {
		r, err := pd.Wait(p.ctx)
		if err == nil {
			err = r.Err()
		}
		var body godap.ThreadsResponseBody
		if err == nil {
			err = r.Decode(&body)
		}
		if err != nil || len(body.Threads) != 3 {
			t.Fatalf("threads request %d: %+v, %v; want 3 threads", i, body.Threads, err)
		}
	}
	if got := threadRequests(fs...); !slices.Equal(got, []int64{1, 1, 1}) {
		t.Fatalf("threads requests per executor = %v for 5 merged requests at once, want one each", got)
	}
}

// stopAll stops each fake and returns the IDE's thread id for each.
func stopAll(t *testing.T, ctx context.Context, c *dapclient.Client, fs ...*fakePydevd) []int {
	t.Helper()
	var tids []int
	for _, f := range fs {
		f.stop()
		tids = append(tids, stoppedOn(ctx, t, c))
	}
	return tids
}

// TestMergedContinueNamesAThread: a continue (or step) that names no
// thread is refused with a message a person can act on, and resumes no
// executor; continue with singleThread false resumes every stopped one.
func TestMergedContinueNamesAThread(t *testing.T) {
	tests := []struct {
		name    string
		command string
		args    map[string]any
		wantErr string // "" for success
		resumed []bool // which of the three executors got continue
		all     bool   // allThreadsContinued in the answer
	}{
		{"thread 0", "continue", map[string]any{"threadId": 0}, "singleThread", []bool{false, false, false}, false},
		{"no thread", "continue", map[string]any{}, "singleThread", []bool{false, false, false}, false},
		{"no arguments", "continue", nil, "singleThread", []bool{false, false, false}, false},
		{"a thread that never was", "continue", map[string]any{"threadId": 987654}, "unknown", []bool{false, false, false}, false},
		{"next without thread", "next", map[string]any{"threadId": 0}, "threadId", []bool{false, false, false}, false},
		{"the second executor's thread", "continue", map[string]any{"threadId": "second"}, "", []bool{false, true, false}, false},
		{"singleThread true", "continue", map[string]any{"threadId": "second", "singleThread": true}, "", []bool{false, true, false}, false},
		{"singleThread false", "continue", map[string]any{"threadId": "second", "singleThread": false}, "", []bool{true, true, false}, true},
		{"singleThread false, no thread", "continue", map[string]any{"singleThread": false}, "", []bool{true, true, false}, true},
		{"thread *", "continue", map[string]any{"threadId": "*"}, "", []bool{true, true, false}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startProxy(t, nil)
			c := p.ide(false, nil)
			fs := []*fakePydevd{p.executor(801, nil), p.executor(802, nil), p.executor(803, nil)}
			tids := stopAll(t, p.ctx, c, fs[0], fs[1]) // the third runs
			args := tt.args
			if args != nil {
				args = map[string]any{}
				for k, v := range tt.args {
					args[k] = v
				}
				if args["threadId"] == "second" {
					args["threadId"] = tids[1]
				}
			}
			r, err := c.Request(p.ctx, tt.command, args)
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != "" {
				if r.Success || !strings.Contains(r.Message, tt.wantErr) || strings.Contains(r.Message, "Traceback") {
					t.Fatalf("%s %v answered success=%v %q; want a failure saying %q", tt.command, args, r.Success, r.Message, tt.wantErr)
				}
			} else if err := r.Err(); err != nil {
				t.Fatal(err)
			}
			if tt.wantErr == "" && tt.command == "continue" {
				var body godap.ContinueResponseBody
				_ = r.Decode(&body)
				if body.AllThreadsContinued != tt.all {
					t.Errorf("allThreadsContinued = %v, want %v", body.AllThreadsContinued, tt.all)
				}
			}
			// A breakpoint request to every executor, answered by all,
			// comes after whatever the proxy sent them before.
			if r, err := c.Request(p.ctx, "setExceptionBreakpoints", map[string]any{"filters": []any{}}); err != nil || !r.Success {
				t.Fatalf("setExceptionBreakpoints: %+v, %v", r, err)
			}
			for i, f := range fs {
				got := f.Count("continue")+f.Count("next") > 0
				if got != tt.resumed[i] {
					t.Errorf("executor %d resumed = %v, want %v (%s)", i, got, tt.resumed[i], f.commands())
				}
			}
			if tt.all {
				// What is resumed is no longer stopped: a second
				// continue-all finds nothing to resume.
				r, err := c.Request(p.ctx, "continue", map[string]any{"singleThread": false})
				if err != nil || !r.Success {
					t.Fatalf("second continue-all: %+v, %v", r, err)
				}
				for i, f := range fs {
					if n := f.Count("continue"); n > 1 {
						t.Errorf("executor %d got %d continue requests", i, n)
					}
				}
			}
		})
	}
}

// TestMergedPauseAll: pause without a thread pauses every executor that
// runs, with pydevd's "every thread" id; each stop reaches the IDE.
func TestMergedPauseAll(t *testing.T) {
	for _, args := range []map[string]any{{"threadId": 0}, {}, {"threadId": "*"}} {
		t.Run(fmt.Sprint(args), func(t *testing.T) {
			p := startProxy(t, nil)
			c := p.ide(false, nil)
			fs := []*fakePydevd{p.executor(901, nil), p.executor(902, nil), p.executor(903, nil)}
			stopAll(t, p.ctx, c, fs[2])
			r, err := c.Request(p.ctx, "pause", args)
			if err != nil || !r.Success {
				t.Fatalf("pause %v: %+v, %v", args, r, err)
			}
			for i, f := range fs[:2] {
				m := f.waitRequest("pause", nil)
				if tid := m.Arguments()["threadId"]; tid != "*" {
					t.Errorf("executor %d paused with threadId %v, want \"*\"", i, tid)
				}
			}
			if n := fs[2].Count("pause"); n != 0 {
				t.Errorf("the executor already stopped got %d pause requests", n)
			}
			seen := map[int]bool{}
			for range 2 {
				ev, err := c.WaitEvent(p.ctx, "stopped", func(b json.RawMessage) bool { return strings.Contains(string(b), `"pause"`) })
				if err != nil {
					t.Fatal(err)
				}
				var body godap.StoppedEventBody
				_ = ev.Decode(&body)
				seen[body.ThreadId] = true
			}
			if len(seen) != 2 {
				t.Fatalf("pause stops on threads %v, want two distinct", seen)
			}
			// And continue-all lets all three go.
			r, err = c.Request(p.ctx, "continue", map[string]any{"singleThread": false})
			if err != nil || !r.Success {
				t.Fatalf("continue-all: %+v, %v", r, err)
			}
			for i, f := range fs {
				if n := f.Count("continue"); n != 1 {
					t.Errorf("executor %d got %d continue requests, want 1", i, n)
				}
			}
		})
	}
}

// TestMergedThreadsWhileFetching: what happens to an executor while its
// threads request is in flight is not lost: a thread that starts before
// the answer shows (and the list is asked for again next time), and an
// executor that leaves drops out of the answer instead of holding it up.
func TestMergedThreadsWhileFetching(t *testing.T) {
	tests := []struct {
		name   string
		during func(a *fakePydevd)
		want   []string // names in the first answer
		then   []string // names in the next one
	}{
		{"a thread starts", func(a *fakePydevd) { _ = a.StartThread(7, "Worker-7") },
			[]string{"pid 11] MainThread", "pid 11] thread 7", "pid 12] MainThread"},
			[]string{"pid 11] MainThread", "pid 11] Worker-7", "pid 12] MainThread"}},
		{"the executor leaves", func(a *fakePydevd) { a.Close() },
			[]string{"pid 12] MainThread"}, []string{"pid 12] MainThread"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startProxy(t, nil)
			c := p.ide(false, nil)
			a, b := p.executor(11, nil), p.executor(12, nil)
			threadNames(t, p.ctx, c) // both lists known
			if err := a.ExitThread(1); err != nil {
				t.Fatal(err)
			}
			_ = a.StartThread(1, "MainThread") // known again only after a new answer
			waitThreadEvent(t, p.ctx, c, "exited")
			waitThreadEvent(t, p.ctx, c, "started")
			release := make(chan struct{})
			held := make(chan struct{}, 1)
			a.SetTamper(func(req fakepydevd.Message, _ map[string]any) {
				if req.Command == "threads" {
					held <- struct{}{}
					select {
					case <-release:
					case <-time.After(30 * time.Second):
					}
				}
			})
			pd, err := c.Send(p.ctx, "threads", nil)
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-held:
			case <-p.ctx.Done():
				t.Fatal("the proxy never asked executor a for its threads")
			}
			tt.during(a)
			if tt.name == "the executor leaves" {
				p.waitExecutors(1)
			} else {
				waitThreadEvent(t, p.ctx, c, "started")
			}
			close(release)
			r, err := pd.Wait(p.ctx)
			if err == nil {
				err = r.Err()
			}
			var body godap.ThreadsResponseBody
			if err == nil {
				err = r.Decode(&body)
			}
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, threads []godap.Thread, want []string) {
				t.Helper()
				var got []string
				for _, th := range threads {
					got = append(got, th.Name[strings.Index(th.Name, "pid "):])
				}
				slices.Sort(got)
				want = slices.Clone(want)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Fatalf("%s: threads %q, want %q", what, got, want)
				}
			}
			check("answer during the change", body.Threads, tt.want)
			next, err := c.Threads(p.ctx)
			if err != nil {
				t.Fatal(err)
			}
			check("next answer", next, tt.then)
			if n := b.Count("threads"); n != 1 {
				t.Errorf("executor b, whose list never changed, got %d threads requests, want 1", n)
			}
		})
	}
}

// TestWrapperThreadsNeverListed: a thread of the worker wrapper's own
// (its connect guard, its lease) that pydevd lists never reaches the
// client, and its stop is resumed rather than shown.
func TestWrapperThreadsNeverListed(t *testing.T) {
	p := startProxy(t, nil)
	c := p.ide(false, nil)
	a := p.executor(701, nil)
	if names := threadNames(t, p.ctx, c); len(names) != 1 {
		t.Fatalf("threads %v, want 1", names)
	}
	_ = a.StartThread(5, "sparkdap-connect-guard")
	_ = a.StartThread(6, "Worker-6")
	waitThreadEvent(t, p.ctx, c, "started")
	deadline := time.Now().Add(10 * time.Second)
	for {
		names := threadNames(t, p.ctx, c)
		var guard, worker bool
		for _, n := range names {
			guard = guard || strings.Contains(n, "sparkdap-")
			worker = worker || strings.Contains(n, "Worker-6")
		}
		if guard {
			t.Fatalf("the wrapper's thread reached the client: %v", names)
		}
		if worker {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("threads %v never listed Worker-6", names)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
