package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// mkdirMode makes dir with exactly perm (past the umask).
func mkdirMode(t *testing.T, dir string, perm fs.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, perm); err != nil {
		t.Fatal(err)
	}
}

// giveAway makes path another user's (uid 65534, nobody), as a planted
// directory would be: only root can, so the test is skipped otherwise.
func giveAway(t *testing.T, path string) {
	t.Helper()
	if runtime.GOOS == "windows" || os.Geteuid() != 0 {
		t.Skip("only root can make a file another user's")
	}
	if err := os.Lchown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
}

// wantPrivate: dir is a directory MkdirPrivate made or accepted. With mode
// bits (Unix) it is 0700; without (Windows: an ACL decides, which the mode
// bits do not show) a directory.
func wantPrivate(t *testing.T, dir string) {
	t.Helper()
	fi, err := os.Lstat(dir)
	switch {
	case err != nil || !fi.IsDir():
		t.Errorf("%s: %v %v, want a directory", dir, fi, err)
	case platform.modeBits && fi.Mode().Perm() != 0o700:
		t.Errorf("%s: %v, want 0700", dir, fi.Mode())
	}
}

// TestPrivateDir: what a directory sparkdap relies on must be, checked
// with Lstat: a directory, not a link, the user's, writable by nobody
// else; and MkdirPrivate, which makes a missing one 0700 and checks one
// found, refuses the same without changing it. Where the platform's
// policy has no mode bits (windowsDirs) a directory the mode bits call
// writable by others is accepted and left as it is: the same cases check
// that policy.
func TestPrivateDir(t *testing.T) {
	me := os.Geteuid()
	for _, tc := range []struct {
		name  string
		make  func(t *testing.T, dir string) // nil: missing
		want  string                         // the problem; "" private
		perm  fs.FileMode                    // after MkdirPrivate, when private
		isSym bool
	}{
		{name: "missing", want: "", perm: 0o700},
		{name: "0700", make: func(t *testing.T, d string) { mkdirMode(t, d, 0o700) }, perm: 0o700},
		{name: "0755 is made 0700", make: func(t *testing.T, d string) { mkdirMode(t, d, 0o755) }, perm: 0o700},
		{name: "group-writable", make: func(t *testing.T, d string) { mkdirMode(t, d, 0o770) }, want: "is writable by others (mode 0770)"},
		{name: "other-writable", make: func(t *testing.T, d string) { mkdirMode(t, d, 0o703) }, want: "is writable by others (mode 0703)"},
		{name: "0777 sticky", make: func(t *testing.T, d string) {
			mkdirMode(t, d, 0o777)
			if err := os.Chmod(d, 0o777|fs.ModeSticky); err != nil {
				t.Fatal(err)
			}
		}, want: "is writable by others"},
		{name: "another user's, 0700", make: func(t *testing.T, d string) { mkdirMode(t, d, 0o700); giveAway(t, d) },
			want: fmt.Sprintf("is owned by uid 65534, not you (uid %d)", me)},
		{name: "another user's, 0777", make: func(t *testing.T, d string) { mkdirMode(t, d, 0o777); giveAway(t, d) },
			want: fmt.Sprintf("is owned by uid 65534, not you (uid %d)", me)},
		{name: "a link to a private directory", make: func(t *testing.T, d string) { symlink(t, t.TempDir(), d) },
			want: "is a symbolic link", isSym: true},
		{name: "another user's link", make: func(t *testing.T, d string) { symlink(t, t.TempDir(), d); giveAway(t, d) },
			want: "is a symbolic link", isSym: true},
		{name: "a dangling link", make: func(t *testing.T, d string) { symlink(t, filepath.Join(t.TempDir(), "nothing"), d) },
			want: "is a symbolic link", isSym: true},
		{name: "a file", make: func(t *testing.T, d string) {
			if err := os.WriteFile(d, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, want: "is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			var before fs.FileInfo
			if tc.make != nil {
				tc.make(t, dir)
				var err error
				if before, err = os.Lstat(dir); err != nil {
					t.Fatalf("what the case made: %v", err)
				}
			}
			want := tc.want
			if !platform.modeBits && strings.HasPrefix(want, "is writable by others") {
				want = ""
			}
			check := func(what string, err error) {
				t.Helper()
				if want == "" {
					if err != nil {
						t.Errorf("%s: %v", what, err)
					}
					return
				}
				var de *DirError
				if !errors.As(err, &de) || !errors.Is(err, ErrUnsafeDir) || de.Path != dir ||
					!strings.Contains(err.Error(), dir+" "+want) || !strings.HasSuffix(err.Error(), ": remove it") {
					t.Errorf("%s: %v, want a DirError: %s %s: remove it", what, err, dir, want)
				}
				if errors.Is(err, ErrSymlink) != tc.isSym {
					t.Errorf("%s: %v: ErrSymlink %v, want %v", what, err, errors.Is(err, ErrSymlink), tc.isSym)
				}
			}
			if tc.make != nil {
				check("PrivateDir", PrivateDir(dir))
			} else if err := PrivateDir(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("PrivateDir of a missing directory: %v", err)
			}
			check("MkdirPrivate", MkdirPrivate(dir))
			after, err := os.Lstat(dir)
			if want == "" {
				switch {
				case err != nil || !after.IsDir():
					t.Errorf("after MkdirPrivate: %v %v, want a directory", after, err)
				case platform.modeBits && after.Mode().Perm() != tc.perm:
					t.Errorf("after MkdirPrivate: %v, want a %04o directory", after.Mode(), tc.perm)
				case !platform.modeBits && before != nil && (after.Mode() != before.Mode() || !os.SameFile(before, after)):
					t.Errorf("the accepted %s was changed: %v -> %v", dir, before.Mode(), after.Mode())
				}
				return
			}
			if err != nil || after.Mode() != before.Mode() || !os.SameFile(before, after) {
				t.Errorf("the refused %s was changed: %v -> %v (%v)", dir, before.Mode(), after, err)
			}
		})
	}
}

// TestMkdirPrivateIn: every level under base is checked, whether made or
// found; base itself is the caller's (a shared /tmp passes). A level that
// fails stops the walk: nothing is made in or below it.
func TestMkdirPrivateIn(t *testing.T) {
	base := t.TempDir()
	if err := os.Chmod(base, 0o777|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	got, err := MkdirPrivateIn(base, filepath.Join("sparkdap-1", "captures"))
	if err != nil || got != filepath.Join(base, "sparkdap-1", "captures") {
		t.Fatalf("MkdirPrivateIn = %s, %v", got, err)
	}
	for _, d := range []string{filepath.Dir(got), got} {
		wantPrivate(t, d)
	}
	if _, err := PrivateDirIn(base, filepath.Join("sparkdap-1", "captures")); err != nil {
		t.Errorf("PrivateDirIn of what MkdirPrivateIn made: %v", err)
	}
	if _, err := PrivateDirIn(base, filepath.Join("sparkdap-1", "run")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("PrivateDirIn of a missing level: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(base, "sparkdap-1", "run")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("PrivateDirIn made something: %v", err)
	}

	// A first level open to all: refused, and nothing made below it.
	// Without mode bits (windowsDirs) the bits say nothing and its place
	// vouches for it: accepted.
	open := filepath.Join(base, "sparkdap-2")
	mkdirMode(t, open, 0o777)
	if platform.modeBits {
		for name, f := range map[string]func(string, string) (string, error){"MkdirPrivateIn": MkdirPrivateIn, "PrivateDirIn": PrivateDirIn} {
			if _, err := f(base, filepath.Join("sparkdap-2", "captures")); !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), open+" is writable by others") {
				t.Errorf("%s under an open level: %v", name, err)
			}
		}
		if ents, _ := os.ReadDir(open); len(ents) != 0 {
			t.Errorf("made in the refused level: %v", ents)
		}
	} else {
		if _, err := MkdirPrivateIn(base, filepath.Join("sparkdap-2", "captures")); err != nil {
			t.Errorf("MkdirPrivateIn under a level the mode bits call open: %v", err)
		}
		if _, err := PrivateDirIn(base, filepath.Join("sparkdap-2", "captures")); err != nil {
			t.Errorf("PrivateDirIn under a level the mode bits call open: %v", err)
		}
	}

	// A missing base is made; rel may not leave it.
	fresh := filepath.Join(t.TempDir(), "cache")
	if _, err := MkdirPrivateIn(fresh, "sparkdap"); err != nil {
		t.Errorf("under a missing base: %v", err)
	}
	if _, err := MkdirPrivateIn(base, filepath.Join("..", "x")); err == nil {
		t.Error("rel leaving base was accepted")
	}

	// A link at the first level, to a directory of the user's: refused,
	// not followed. Last: where there are no links (Wine) symlink skips.
	target := t.TempDir()
	symlink(t, target, filepath.Join(base, "sparkdap-3"))
	if _, err := MkdirPrivateIn(base, filepath.Join("sparkdap-3", "captures")); !errors.Is(err, ErrSymlink) {
		t.Errorf("MkdirPrivateIn through a link: %v", err)
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Errorf("made through the link: %v", ents)
	}
}

// TestMkdirPrivateChecksWhatItMakes: the missing directories on the way
// to path are made 0700 and checked; an existing one above them is the
// caller's and is left as it is.
func TestMkdirPrivateChecksWhatItMakes(t *testing.T) {
	shared := t.TempDir()
	if err := os.Chmod(shared, 0o777|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(shared, "a", "b", "c")
	if err := MkdirPrivate(dir); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(shared, "a"), filepath.Join(shared, "a", "b"), dir} {
		wantPrivate(t, d)
	}
	if fi, _ := os.Lstat(shared); fi.Mode().Perm() != 0o777 {
		t.Errorf("the existing parent was changed: %v", fi.Mode())
	}
}

// TestWithFix: a caller adds its own way out to a DirError's; other
// errors pass unchanged.
func TestWithFix(t *testing.T) {
	err := WithFix(&DirError{Path: "/tmp/sparkdap-1000", Problem: "is owned by uid 1001, not you (uid 1000)", Fix: "remove it"}, "set XDG_RUNTIME_DIR")
	if got := err.Error(); got != "/tmp/sparkdap-1000 is owned by uid 1001, not you (uid 1000): remove it or set XDG_RUNTIME_DIR" {
		t.Errorf("WithFix: %s", got)
	}
	other := errors.New("other")
	if WithFix(other, "x") != other || WithFix(nil, "x") != nil {
		t.Error("WithFix changed an error that is no DirError")
	}
}

// TestUserDir: with a cache directory, sparkdap; without, a name of the
// user's own under the shared temp directory.
func TestUserDir(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", cache)
	if base, name := UserDir(); name != "sparkdap" || base == os.TempDir() {
		t.Errorf("UserDir with a cache directory = %s, %s", base, name)
	}
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		return
	}
	tmp := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	t.Setenv("TMPDIR", tmp)
	if base, name := UserDir(); base != tmp || name != fmt.Sprintf("sparkdap-%d", os.Geteuid()) {
		t.Errorf("UserDir without one = %s, %s", base, name)
	}
}

// TestDirPolicies: each platform's directory check, run here on the
// directories it would meet. With uids and mode bits (Unix) a directory
// another user owns, or the group or others may write to, is refused;
// with neither (Windows: no uid, an ACL the mode bits do not show) those
// are accepted, and left as they are, but a link or a file is refused all
// the same. The owner is given (owners), so no root is needed for it.
func TestDirPolicies(t *testing.T) {
	owned := func(owner int) func(fs.FileInfo) (int, int, bool) {
		return func(fs.FileInfo) (int, int, bool) { return owner, 1000, true }
	}
	mine := dirPolicy{owners: owned(1000), modeBits: true}
	theirs := dirPolicy{owners: owned(65534), modeBits: true}
	dirOf := func(perm fs.FileMode) func(t *testing.T, d string) {
		return func(t *testing.T, d string) { mkdirMode(t, d, perm) }
	}
	link := func(t *testing.T, d string) { symlink(t, t.TempDir(), d) }
	file := func(t *testing.T, d string) {
		if err := os.WriteFile(d, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		policy dirPolicy
		make   func(t *testing.T, dir string)
		want   string      // the problem; "" accepted
		perm   fs.FileMode // after tighten, when accepted
	}{
		{"unix: 0700", mine, dirOf(0o700), "", 0o700},
		{"unix: 0755 is made 0700", mine, dirOf(0o755), "", 0o700},
		{"unix: group-writable", mine, dirOf(0o770), "is writable by others (mode 0770)", 0},
		{"unix: other-writable", mine, dirOf(0o777), "is writable by others (mode 0777)", 0},
		{"unix: another user's", theirs, dirOf(0o700), "is owned by uid 65534, not you (uid 1000)", 0},
		{"unix: a link", mine, link, "is a symbolic link", 0},
		{"unix: a file", mine, file, "is not a directory", 0},
		{"windows: 0700", windowsDirs, dirOf(0o700), "", 0o700},
		{"windows: 0777 (an ACL decides) is left as it is", windowsDirs, dirOf(0o777), "", 0o777},
		{"windows: 0755 is left as it is", windowsDirs, dirOf(0o755), "", 0o755},
		{"windows: a link", windowsDirs, link, "is a symbolic link", 0},
		{"windows: a file", windowsDirs, file, "is not a directory", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			tc.make(t, dir)
			fi, err := os.Lstat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if tc.policy.modeBits && !platform.modeBits && fi.IsDir() {
				t.Skip("the Unix policy's directory cases need Unix mode bits, which this file system does not show")
			}
			err = tc.policy.checkDir(dir, fi)
			if tc.want != "" {
				if !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), dir+" "+tc.want) {
					t.Errorf("checkDir: %v, want %s %s", err, dir, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("checkDir: %v", err)
			}
			if err := tc.policy.tighten(dir); err != nil {
				t.Fatal(err)
			}
			// Without mode bits here what mkdirMode asked for is not what
			// the directory shows (Windows: 0777, or 0555 if read-only):
			// the Windows policy must leave whatever it is as it is.
			want := tc.perm
			if !platform.modeBits {
				want = fi.Mode().Perm()
			}
			if after, err := os.Lstat(dir); err != nil || after.Mode().Perm() != want {
				t.Errorf("after tighten: %v %v, want %04o", after, err, want)
			}
		})
	}
}

// TestTempName: the user's own name in a shared temp directory carries
// the uid; where there is none (os.Geteuid is -1 on Windows) it is plain
// sparkdap.
func TestTempName(t *testing.T) {
	for _, tc := range []struct {
		uid  int
		want string
	}{{1000, "sparkdap-1000"}, {0, "sparkdap-0"}, {-1, "sparkdap"}} {
		if got := tempName(tc.uid); got != tc.want {
			t.Errorf("tempName(%d) = %s, want %s", tc.uid, got, tc.want)
		}
	}
}
