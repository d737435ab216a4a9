package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sparkdap/sparkdap/cmd/sparkdap/liveview"
	"github.com/sparkdap/sparkdap/dap"
)

// liveView redraws serve's status block while the proxy runs.
type liveView struct {
	term *liveview.Terminal
	fd   uintptr
	done chan struct{}
	wg   sync.WaitGroup
}

// newLiveView decides on --live: nil means plain log lines.
func newLiveView(mode, logFormat string, stderr io.Writer) (*liveView, error) {
	f, tty := ansiTerminal(stderr)
	switch mode {
	case "off":
		return nil, nil
	case "auto":
		if !tty || logFormat != "console" {
			return nil, nil
		}
	case "on":
		if !tty {
			return nil, fmt.Errorf("--live on: stderr is not a terminal that takes ANSI sequences")
		}
	default:
		return nil, fmt.Errorf("--live %q: want auto, on or off", mode)
	}
	return &liveView{term: liveview.NewTerminal(f), fd: f.Fd(), done: make(chan struct{})}, nil
}

// start redraws twice a second from the hub's stats until stop, on a
// goroutine of its own: a redraw waits for the terminal holding no lock of
// the hub (Stats takes and releases it before the write).
func (v *liveView) start(hub *dap.Hub, ideAddr, executorAddr string) {
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			snap := liveview.Snapshot{IDEAddr: ideAddr, ExecutorAddr: executorAddr, Stats: hub.Stats()}
			_ = v.term.Draw(liveview.Render(snap, terminal.width(v.fd)))
			select {
			case <-tick.C:
			case <-v.done:
				return
			}
		}
	}()
}

// stop ends the redraws. A redraw blocked on a terminal that is not being
// read (paused with Ctrl-S) is waited for at most stderrFlushWait: serve
// exits all the same.
func (v *liveView) stop() {
	select {
	case <-v.done:
	default:
		close(v.done)
	}
	drawn := make(chan struct{})
	go func() {
		v.wg.Wait()
		close(drawn)
	}()
	select {
	case <-drawn:
	case <-time.After(stderrFlushWait):
	}
}
