package liveview

import (
	"fmt"
	"strings"

	"github.com/sparkdap/sparkdap/admission"
	"github.com/sparkdap/sparkdap/dap"
)

// Snapshot is what one frame of the view shows.
type Snapshot struct {
	IDEAddr, ExecutorAddr string
	dap.Stats
}

// maxRows bounds the executor lines, so a job with thousands of debugged
// tasks does not fill the terminal: stopped ones come first.
const maxRows = 12

// maxExceptionRows bounds the exception group lines, the largest first.
const maxExceptionRows = 3

// Render returns the view, at most width columns wide, ending in a newline.
// The labels and stop locations come from the cluster: the proxy cleans
// them as they come in, and Render cleans them again (admission.Clean), since
// a control character in a view redrawn twice a second would act on the
// terminal each time.
func Render(s Snapshot, width int) string {
	if width < 40 {
		width = 40
	}
	var b strings.Builder
	ide := "waiting for the IDE"
	if s.IDEAttached {
		ide = "attached"
	}
	stopped := 0
	for _, e := range s.Executors {
		if e.Stopped {
			stopped++
		}
	}
	// Counts first: when the terminal is narrow, the addresses are cut.
	line(&b, width, "── sparkdap: %d debugged · %d stopped · %d refused │ IDE %s %s │ executor port %s",
		len(s.Executors), stopped, s.Refused, admission.Clean(s.IDEAddr, width), ide, admission.Clean(s.ExecutorAddr, width))
	if s.Undebugged > 0 {
		// Not a refusal the user can wait out: a debugger to install.
		line(&b, width, "   %d worker(s) run undebugged, cannot load a debugger: %s",
			s.Undebugged, admission.Clean(s.LastUndebugged, width))
	}
	for i, g := range s.Exceptions {
		if i == maxExceptionRows {
			line(&b, width, "   … and %d more exception groups (sparkdap workers lists them)", len(s.Exceptions)-i)
			break
		}
		held := ""
		if g.Held > 0 {
			held = fmt.Sprintf(" (%d waiting)", g.Held)
		}
		tasks := "tasks"
		if g.Tasks == 1 {
			tasks = "task"
		}
		line(&b, width, "   %d %s raised %s at %s%s", g.Tasks, tasks, admission.Clean(g.Type, admission.MaxTextRunes),
			admission.Clean(g.Place, admission.MaxTextRunes), held)
	}
	rows := append([]dap.ExecutorStatus(nil), s.Executors...)
	// Stopped first, then by id: what needs the user is on top.
	for i := 1; i < len(rows); i++ {
		for j := i; j > 0 && less(rows[j], rows[j-1]); j-- {
			rows[j], rows[j-1] = rows[j-1], rows[j]
		}
	}
	if len(rows) == 0 {
		line(&b, width, "   waiting for executors: run the job with `sparkdap submit` (or `sparkdap conf`)")
	}
	for i, e := range rows {
		if i == maxRows {
			line(&b, width, "   … and %d more", len(rows)-maxRows)
			break
		}
		state := "running"
		if e.MaxStopResumed {
			state = "running (resumed after --max-stop)"
		}
		if e.Stopped {
			state = "STOPPED"
			if e.StoppedAt != "" {
				state += " at " + admission.Clean(e.StoppedAt, admission.MaxTextRunes)
			}
		}
		line(&b, width, " %3d  %-9s %s  [%s]", e.ID, size(e.OutputBytes), state, admission.Clean(e.Label, width))
	}
	return b.String()
}

func less(a, b dap.ExecutorStatus) bool {
	if a.Stopped != b.Stopped {
		return a.Stopped
	}
	return a.ID < b.ID
}

func line(b *strings.Builder, width int, format string, args ...any) {
	b.WriteString(clip(fmt.Sprintf(format, args...), width))
	b.WriteByte('\n')
}

// clip cuts text to width runes, marking the cut.
func clip(text string, width int) string {
	r := []rune(text)
	if len(r) <= width {
		return text
	}
	return string(r[:width-1]) + "…"
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
