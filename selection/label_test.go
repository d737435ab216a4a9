package selection

import "testing"

func TestTaskLabel(t *testing.T) {
	for _, tt := range []struct {
		task Task
		want string
	}{
		{Task{Stage: 3, Partition: 7}, "partition 7 · stage 3"},
		{Task{Stage: 3, Partition: 7, Attempt: 2, TaskAttemptID: 99}, "partition 7 · stage 3 · attempt 2"},
	} {
		if got := tt.task.Label(); got != tt.want {
			t.Errorf("%+v.Label() = %q, want %q", tt.task, got, tt.want)
		}
	}
}
