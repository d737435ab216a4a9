package capture

import (
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/internal/shellquote"
)

// TestSummaryReplayCommand: the replay command pastes into the user's
// shell: POSIX sh, or PowerShell on Windows.
func TestSummaryReplayCommand(t *testing.T) {
	old := localShell
	t.Cleanup(func() { localShell = old })
	for _, tc := range []struct {
		sh         shellquote.Dialect
		path, want string
	}{
		{shellquote.POSIX, "/home/me/caps/it's.capture", `replay: sparkdap replay '/home/me/caps/it'\''s.capture'`},
		{shellquote.PowerShell, `C:\Users\me\captures\x.capture`, `replay: sparkdap replay C:\Users\me\captures\x.capture`},
		{shellquote.PowerShell, `C:\Users\Jo O'Neil\captures\x.capture`, `replay: sparkdap replay 'C:\Users\Jo O''Neil\captures\x.capture'`},
	} {
		localShell = tc.sh
		got := Summary(map[string]any{"path": tc.path, "function": "f", "bytes": 3})
		if !strings.HasSuffix(got, tc.want) {
			t.Errorf("%v: Summary = %q, want it to end %q", tc.sh, got, tc.want)
		}
	}
}
