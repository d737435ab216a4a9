package workerwrap

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/internal/safefile"
)

// TestDebuggerCacheDirRefusesOthers: the wheels every debugged job runs
// are kept only where nobody else can swap them: a sparkdap or
// sparkdap/debuggers directory another user made, or may write to, is
// refused, naming it, and nothing is written there.
func TestDebuggerCacheDirRefusesOthers(t *testing.T) {
	for _, tc := range []struct {
		name, planted string
		perm          os.FileMode
		owner         int // 0: the test's own user
		want          string
	}{
		{name: "sparkdap writable by all", planted: "sparkdap", perm: 0o777, want: "is writable by others"},
		{name: "debuggers writable by the group", planted: "sparkdap/debuggers", perm: 0o770, want: "is writable by others"},
		{name: "sparkdap another user's", planted: "sparkdap", perm: 0o755, owner: 65534, want: "is owned by uid 65534, not you"},
		{name: "debuggers another user's", planted: "sparkdap/debuggers", perm: 0o700, owner: 65534, want: "is owned by uid 65534, not you"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.owner != 0 && os.Geteuid() != 0 {
				t.Skip("only root can make a directory another user's")
			}
			cache := t.TempDir()
			t.Setenv("XDG_CACHE_HOME", cache)
			t.Setenv("HOME", cache) // macOS's UserCacheDir
			base, err := os.UserCacheDir()
			if err != nil {
				t.Fatal(err)
			}
			planted := filepath.Join(base, tc.planted)
			if err := os.MkdirAll(planted, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(planted, tc.perm); err != nil {
				t.Fatal(err)
			}
			if tc.owner != 0 {
				if err := os.Lchown(planted, tc.owner, tc.owner); err != nil {
					t.Fatal(err)
				}
			}
			_, err = DebuggerCacheDir()
			var we *WheelError
			if !errors.As(err, &we) || !errors.Is(err, safefile.ErrUnsafeDir) || !strings.Contains(err.Error(), planted+" "+tc.want) {
				t.Fatalf("err %v, want a WheelError naming %s %s", err, planted, tc.want)
			}
			if fi, err := os.Lstat(planted); err != nil || fi.Mode().Perm() != tc.perm {
				t.Errorf("the refused directory was changed: %v %v", fi.Mode(), err)
			}
			if tc.planted == "sparkdap" {
				if _, err := os.Lstat(filepath.Join(planted, "debuggers")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a directory was made in the refused one: %v", err)
				}
			}
		})
	}
}
