package selection

// Workers that went away. A worker process's watch connection lasts as
// long as the process, so its end is the worker's end: the Board keeps
// the last MaxFinished of them, so a view can list what ran and how it
// ended after the process is gone, in memory bounded whatever the job's
// size (a job of many short-lived workers, spark.python.worker.reuse
// off, has one per task).

// MaxFinished bounds the workers whose watch connection closed that a
// Board keeps: past it, the oldest is dropped.
const MaxFinished = 1000

// finishedRing holds the last MaxFinished finished workers. Guarded by
// Board.mu.
type finishedRing struct {
	buf []Worker // grows to MaxFinished, then is written round
	// next is where the next worker goes once buf is full: the oldest.
	next int
}

func (r *finishedRing) add(w Worker) {
	if len(r.buf) < MaxFinished {
		r.buf = append(r.buf, w)
		return
	}
	r.buf[r.next] = w
	r.next = (r.next + 1) % MaxFinished
}

// list is a copy of the workers, oldest first.
func (r *finishedRing) list() []Worker {
	out := make([]Worker, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	out = append(out, r.buf[:r.next]...)
	for i := range out {
		if t := out[i].Task; t != nil {
			c := *t
			out[i].Task = &c
		}
	}
	return out
}

// finish retires a served watcher: it is no longer followed, and is
// kept as finished. Since becomes when it went away, and Running false:
// whatever task it reported last ended with the process.
func (wa *Watch) finish() {
	b := wa.b
	b.mu.Lock()
	if _, ok := b.watchers[wa.w]; ok {
		delete(b.watchers, wa.w)
		w := wa.w.info
		w.Running = false
		w.Since = b.now()
		b.finished.add(w)
	}
	b.mu.Unlock()
	b.update()
}

// Finished lists the workers whose watch connection closed, the last
// MaxFinished of them, oldest first. Each one's Since is when it went
// away, and its Task the last one it reported.
func (b *Board) Finished() []Worker {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.finished.list()
}
