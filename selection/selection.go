package selection

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Selection says which tasks debug: a task is selected when its partition,
// stage and executor are each in their list (a nil list: any; an empty
// one: none) and it falls in the sample. The worker tests it at every task
// start (workerwrap's task._selected).
type Selection struct {
	Partitions []int64  `json:"partitions"`
	Stages     []int64  `json:"stages"`
	Executors  []string `json:"executors"`
	// SampleRate in (0, 1]: the share of (stage, partition) pairs selected,
	// the same pairs in every run and every attempt.
	SampleRate float64 `json:"sampleRate"`
}

// All selects every task.
func All() Selection { return Selection{SampleRate: 1} }

// None selects no task.
func None() Selection { return Selection{Partitions: []int64{}, SampleRate: 1} }

// Bounds on a selection, which every worker receives and parses at once.
const (
	MaxIDs           = 4096
	MaxExecutors     = 1024
	MaxExecutorRunes = 128
)

// ErrBadSelection is a selection no worker could apply.
var ErrBadSelection = errors.New("bad selection")

// Validate checks s is one a worker applies: ids not negative, lists
// bounded, a sample rate in (0, 1].
func (s Selection) Validate() error {
	if !(s.SampleRate > 0 && s.SampleRate <= 1) {
		return fmt.Errorf("%w: sample rate %v is not in (0, 1]", ErrBadSelection, s.SampleRate)
	}
	for _, l := range []struct {
		name string
		ids  []int64
	}{{"partition", s.Partitions}, {"stage", s.Stages}} {
		if len(l.ids) > MaxIDs {
			return fmt.Errorf("%w: more than %d %s ids", ErrBadSelection, MaxIDs, l.name)
		}
		for _, id := range l.ids {
			if id < 0 {
				return fmt.Errorf("%w: negative %s id %d", ErrBadSelection, l.name, id)
			}
		}
	}
	if len(s.Executors) > MaxExecutors {
		return fmt.Errorf("%w: more than %d executors", ErrBadSelection, MaxExecutors)
	}
	for _, e := range s.Executors {
		if e == "" || len([]rune(e)) > MaxExecutorRunes || strings.ContainsFunc(e, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return fmt.Errorf("%w: executor id %q is empty, longer than %d characters or has control characters", ErrBadSelection, e, MaxExecutorRunes)
		}
	}
	return nil
}

// Selects reports whether s selects the task: the worker's decision, for
// tests and views.
func (s Selection) Selects(stage, partition int64, executor string) bool {
	if s.Partitions != nil && !slices.Contains(s.Partitions, partition) {
		return false
	}
	if s.Stages != nil && !slices.Contains(s.Stages, stage) {
		return false
	}
	if s.Executors != nil && !slices.Contains(s.Executors, executor) {
		return false
	}
	return s.SampleRate >= 1 || sampled(stage, partition, s.SampleRate)
}

// String says s for people: "partitions 37 · stages all · executors all".
func (s Selection) String() string {
	ids := func(name string, l []int64) string {
		switch {
		case l == nil:
			return name + " all"
		case len(l) == 0:
			return name + " none"
		}
		parts := make([]string, len(l))
		for i, id := range l {
			parts[i] = strconv.FormatInt(id, 10)
		}
		return name + " " + strings.Join(parts, ",")
	}
	out := ids("partitions", s.Partitions) + " · " + ids("stages", s.Stages) + " · "
	switch {
	case s.Executors == nil:
		out += "executors all"
	case len(s.Executors) == 0:
		out += "executors none"
	default:
		out += "executors " + strings.Join(s.Executors, ",")
	}
	if s.SampleRate < 1 {
		out += " · sample rate " + strconv.FormatFloat(s.SampleRate, 'g', -1, 64)
	}
	return out
}
