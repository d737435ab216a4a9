package doctor

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sparkdap/sparkdap/control"
	"github.com/sparkdap/sparkdap/internal/buildinfo"
)

// A Spark job keeps the wrapper it was submitted with for its whole run,
// so after an upgrade its workers may speak another release's protocol
// than the serve they reach; what breaks then looks like a bug of either.
// The workers say their wrapper's version in their hellos, and the running
// serve lists it (control's known-workers): this check compares them.

const wrapperCheckName = "the running job's wrapper"

// olderWrapper names the version of a worker whose wrapper said none.
const olderWrapper = "an older sparkdap (before version reporting)"

// controlAskTimeout bounds the question to serve: it answers from memory.
const controlAskTimeout = 10 * time.Second

// checkWrapperVersion asks the serve on Config.Control which sparkdap
// release each worker of the running job runs the wrapper of.
func (d *doctor) checkWrapperVersion(ctx context.Context) {
	path := d.f.Control
	ctx, cancel := context.WithTimeout(ctx, min(controlAskTimeout, max(d.f.Timeout, time.Second)))
	defer cancel()
	ans, err := control.Call(ctx, path, control.Request{Op: control.OpKnownWorkers})
	switch {
	case err != nil && control.NoServer(err) && d.ideState == portSparkdap:
		// A serve started with its own --control listens elsewhere.
		d.report(checkResult{name: wrapperCheckName, v: vSkip,
			detail: fmt.Sprintf("not checked: a sparkdap serves the IDE port %s, but none answers on the control socket %s", d.f.IDE, path),
			fix:    "if that serve was started with --control, give doctor the same --control"})
		return
	case err != nil && control.NoServer(err):
		d.report(checkResult{name: wrapperCheckName, v: vSkip,
			detail: fmt.Sprintf("no sparkdap serve is running (none answers on the control socket %s): nothing to compare", path)})
		return
	case err != nil:
		d.report(checkResult{name: wrapperCheckName, v: vWarn,
			detail: fmt.Sprintf("not checked: cannot ask serve on the control socket %s: %v", path, err),
			fix:    "give --control the socket serve printed at its start (or the --ide of that serve)"})
		return
	}
	d.report(wrapperVerdict(ans, buildinfo.Version))
}

// wrapperVerdict compares the versions of the workers ans lists with the
// version of the serve that answered; mine is this doctor's, which the
// fix names when it is not serve's. It weighs the live workers (stopped,
// running, idle), and only when there are none the ones that went away,
// which may be of an earlier job; a worker without a watch it leaves out.
func wrapperVerdict(ans control.Answer, mine string) checkResult {
	// A serve whose answer says no version predates version reporting,
	// as a wrapper that says none does.
	serve := versionName(ans.Version)
	var live, gone []control.KnownWorker
	unwatched := 0
	for _, k := range ans.Known {
		switch {
		case k.Unwatched:
			// Its version is unknown, not older: only a watch hello's
			// is kept.
			unwatched++
		case k.State == control.StateFinished || k.State == control.StateFailed:
			gone = append(gone, k)
		default:
			live = append(live, k)
		}
	}
	var note string
	if unwatched > 0 {
		note = fmt.Sprintf(" (%d stopped worker(s) that follow no selection watch not compared: their version is unknown)", unwatched)
	}
	rows, whose := live, "worker(s) of the running job"
	if len(live) == 0 {
		switch {
		case len(gone) == 0 && unwatched > 0:
			return checkResult{name: wrapperCheckName, v: vSkip,
				detail: fmt.Sprintf("serve (%s) answers, but its %d worker(s) follow no selection watch, which says their version: nothing to compare", serve, unwatched)}
		case len(gone) == 0:
			return checkResult{name: wrapperCheckName, v: vSkip,
				detail: fmt.Sprintf("serve (%s) answers, but no worker has reached it yet: nothing to compare", serve)}
		}
		rows, whose = gone, "worker(s) that reached serve and went away (no job's worker follows it now)"
	}
	groups := byVersion(rows)
	if len(groups) == 1 && groups[0].version == ans.Version && ans.Version != "" {
		return checkResult{name: wrapperCheckName, v: vOK,
			detail: fmt.Sprintf("all %d %s run the wrapper of %s, serve's%s", len(rows), whose, serve, note)}
	}
	var parts []string
	other := 0
	for _, g := range groups {
		if g.version == ans.Version && ans.Version != "" {
			continue
		}
		other += g.count
		parts = append(parts, fmt.Sprintf("%d on %s (e.g. %s)", g.count, versionName(g.version), where(g.example)))
	}
	fix := "resubmit the job with this sparkdap's wrapper (sparkdap submit, or sparkdap wrap / conf for your own spark-submit), " +
		"or run the sparkdap serve of the job's version"
	switch {
	case ans.Version == "":
		fix = fmt.Sprintf("restart serve with this sparkdap (%s) and resubmit the job with its wrapper (sparkdap submit, or sparkdap wrap / conf "+
			"for your own spark-submit), so that both are one release", mine)
	case mine != ans.Version:
		fix = fmt.Sprintf("resubmit the job with the wrapper of serve's %s (its sparkdap submit, wrap or conf; this doctor is %s), "+
			"or run the sparkdap serve of the job's version", serve, mine)
	}
	return checkResult{name: wrapperCheckName, v: vWarn,
		detail: fmt.Sprintf("serve is %s, but %d of %d %s run another release's wrapper: %s%s",
			serve, other, len(rows), whose, strings.Join(parts, "; "), note),
		fix: fix}
}

// versionGroup is the workers of one wrapper version.
type versionGroup struct {
	version string
	count   int
	example control.KnownWorker
}

// byVersion groups rows by their wrapper's version, most workers first,
// then by version, so that the report is the same for the same workers.
func byVersion(rows []control.KnownWorker) []versionGroup {
	idx := map[string]int{}
	var groups []versionGroup
	for _, k := range rows {
		i, ok := idx[k.SparkdapVersion]
		if !ok {
			i = len(groups)
			idx[k.SparkdapVersion] = i
			groups = append(groups, versionGroup{version: k.SparkdapVersion, example: k})
		}
		groups[i].count++
	}
	sort.SliceStable(groups, func(i, j int) bool {
		if groups[i].count != groups[j].count {
			return groups[i].count > groups[j].count
		}
		return groups[i].version < groups[j].version
	})
	return groups
}

// versionName is how the report names a worker's wrapper version.
func versionName(v string) string {
	if v == "" {
		return olderWrapper
	}
	return "sparkdap " + v
}

// where names a worker by its executor and host, as far as known.
func where(k control.KnownWorker) string {
	var parts []string
	if k.ExecutorID != "" {
		parts = append(parts, "executor "+k.ExecutorID)
	}
	if k.Host != "" {
		parts = append(parts, "host "+k.Host)
	}
	if len(parts) == 0 {
		return fmt.Sprintf("pid %d", k.PID)
	}
	return strings.Join(parts, " on ")
}
