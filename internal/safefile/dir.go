package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Private directories. What sparkdap keeps for the user alone (captures,
// the control socket, the debugger wheels it ships) lives in directories
// that must be the user's: a directory someone else owns, or may write to,
// lets them swap a capture that replay then runs, or put their own socket
// where sparkdap capture talks. So a directory sparkdap relies on is
// checked, never assumed:
//   - it is a directory, not a symbolic link (Lstat: a link planted by
//     someone else is refused, not followed);
//   - it is owned by the user sparkdap runs as (the effective uid; for
//     root, root: a directory another user made is refused even though
//     root could write into it);
//   - neither its group nor others may write to it.
//
// What is checked is every level sparkdap relies on: the directory itself
// and every directory sparkdap makes on the way to it. The directories
// above are the user's to vouch for (their home, $XDG_RUNTIME_DIR, or the
// shared sticky temp directory, under which sparkdap uses a name of the
// user's own, sparkdap-<uid>). A directory that is missing is made 0700;
// one that fails is left alone and refused with a *DirError that names it
// and the fix.

// ErrUnsafeDir is what a *DirError is (errors.Is).
var ErrUnsafeDir = errors.New("not a private directory")

// DirError: Path is not a directory sparkdap may rely on. Problem says
// why, Fix what to do; Err is ErrSymlink for a link, else nil.
type DirError struct {
	Path, Problem, Fix string
	Err                error
}

func (e *DirError) Error() string {
	return fmt.Sprintf("%s %s: %s", e.Path, e.Problem, e.Fix)
}

// Is makes errors.Is(err, ErrUnsafeDir) hold.
func (e *DirError) Is(target error) bool { return target == ErrUnsafeDir }

func (e *DirError) Unwrap() error { return e.Err }

// WithFix adds a way out to err's fix when err is a *DirError (e.g. "set
// XDG_RUNTIME_DIR", "give --control PATH"); other errors are returned as
// they are.
func WithFix(err error, alternative string) error {
	var de *DirError
	if !errors.As(err, &de) {
		return err
	}
	c := *de
	c.Fix += " or " + alternative
	return &c
}

// PrivateDir checks that path is a directory sparkdap may rely on: not a
// link, owned by the current user, not writable by group or others. A
// missing path is the usual fs.ErrNotExist.
func PrivateDir(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	return checkDir(path, fi)
}

// dirPolicy is what a platform's file metadata can say about a
// directory; platform (dir_unix.go, dir_other.go) is this one's.
type dirPolicy struct {
	// owners is the uid owning fi and the uid sparkdap runs as; ok is
	// false where files have no uid (Windows: os.Geteuid is -1 and
	// FileInfo.Sys holds no owner), and then the owner is not checked.
	owners func(fi fs.FileInfo) (owner, me int, ok bool)
	// modeBits: the group and others' write bits say who else may write
	// (Unix). On Windows an ACL says, which the mode bits do not show (Go
	// reports a directory as 0777 unless it is read-only) and os.Chmod
	// cannot set (it changes only the read-only attribute): the bits are
	// neither checked nor tightened there.
	modeBits bool
}

// windowsDirs is the policy where files have neither uids nor meaningful
// mode bits: a directory's place (the user's own profile, %LocalAppData%)
// is what keeps it the user's. Only the link and not-a-directory checks
// hold.
var windowsDirs = dirPolicy{
	owners: func(fs.FileInfo) (owner, me int, ok bool) { return 0, 0, false },
}

func checkDir(path string, fi fs.FileInfo) error { return platform.checkDir(path, fi) }

func (p dirPolicy) checkDir(path string, fi fs.FileInfo) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return &DirError{Path: path, Problem: "is a symbolic link (a link is not followed)", Fix: "remove it", Err: ErrSymlink}
	case !fi.IsDir():
		return &DirError{Path: path, Problem: "is not a directory", Fix: "remove it"}
	}
	if owner, me, ok := p.owners(fi); ok && owner != me {
		return &DirError{Path: path, Problem: fmt.Sprintf("is owned by uid %d, not you (uid %d)", owner, me), Fix: "remove it"}
	}
	if p.modeBits && fi.Mode().Perm()&0o022 != 0 {
		return &DirError{Path: path, Problem: fmt.Sprintf("is writable by others (mode %04o), who may have put anything in it", fi.Mode().Perm()),
			Fix: "remove it"}
	}
	return nil
}

// MkdirPrivate makes path a private directory: the missing directories up
// to it are made 0700 and checked (PrivateDir), as is path itself when it
// was there already (then, being the user's, it is made 0700 if others
// may read or enter it). The existing directories above it are the
// caller's to vouch for.
func MkdirPrivate(path string) error {
	path = filepath.Clean(path)
	top := path
	for {
		_, err := os.Lstat(top)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		up := filepath.Dir(top)
		if up == top {
			break
		}
		top = up
	}
	if top == path {
		if err := PrivateDir(path); err != nil {
			return err
		}
		return tighten(path)
	}
	rel, err := filepath.Rel(top, path)
	if err != nil {
		return err
	}
	_, err = MkdirPrivateIn(top, rel)
	return err
}

// MkdirPrivateIn makes base/rel a private directory and returns its path:
// base is the caller's to vouch for (made, 0700, if missing, but not
// checked: the user's home, $XDG_RUNTIME_DIR, the temp directory); every
// directory of rel under it, from the first down to base/rel, is made 0700
// if missing and checked (PrivateDir) whether made or found; base/rel,
// once checked, is made 0700 if others may read or enter it.
func MkdirPrivateIn(base, rel string) (string, error) {
	return privateIn(base, rel, true)
}

// PrivateDirIn checks, without making anything, every directory of rel
// under base, as MkdirPrivateIn would; a missing one is fs.ErrNotExist.
func PrivateDirIn(base, rel string) (string, error) {
	return privateIn(base, rel, false)
}

func privateIn(base, rel string, create bool) (string, error) {
	rel = filepath.Clean(rel)
	if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("private directory %q is not under %s", rel, base)
	}
	if create {
		if err := os.MkdirAll(base, 0o700); err != nil {
			return "", err
		}
	}
	dir := base
	if rel == "." {
		return dir, nil
	}
	for _, name := range strings.Split(rel, string(filepath.Separator)) {
		dir = filepath.Join(dir, name)
		if create {
			// Mkdir, not MkdirAll: MkdirAll would follow a link found
			// there. Whoever made it first (another user, in a shared
			// directory), the check below decides.
			if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return "", err
			}
		}
		if err := PrivateDir(dir); err != nil {
			return "", err
		}
	}
	if create {
		if err := tighten(dir); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// tighten makes the checked directory dir, the user's, 0700.
func tighten(dir string) error { return platform.tighten(dir) }

func (p dirPolicy) tighten(dir string) error {
	if !p.modeBits {
		return nil
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// UserDir is where sparkdap keeps its per-user directories unless told
// otherwise: base is the user's cache directory (os.UserCacheDir:
// $XDG_CACHE_HOME, ~/.cache, ~/Library/Caches) and name "sparkdap". When
// there is none (no $HOME, no $XDG_CACHE_HOME), base is the shared temp
// directory (os.TempDir: $TMPDIR, /tmp) and name "sparkdap-<uid>": a name
// of the user's own, so that another user who made it first is refused
// rather than shared with. Give MkdirPrivateIn(base, name/...) the result.
func UserDir() (base, name string) {
	if d, err := os.UserCacheDir(); err == nil {
		return d, "sparkdap"
	}
	return os.TempDir(), TempName()
}

// TempName is the name of the user's own sparkdap directory in a shared
// temp directory: sparkdap-<uid> (sparkdap where there are no uids).
func TempName() string { return tempName(os.Geteuid()) }

// tempName is TempName for uid, which is -1 where there are no uids
// (os.Geteuid on Windows).
func tempName(uid int) string {
	if uid >= 0 {
		return fmt.Sprintf("sparkdap-%d", uid)
	}
	return "sparkdap"
}
