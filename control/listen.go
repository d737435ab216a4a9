package control

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Dir is the default control sockets' directory: sparkdap under
// $XDG_RUNTIME_DIR (the user's own, 0700, cleared at logout), else
// sparkdap/run under the user's cache directory.
func Dir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "sparkdap")
	}
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "sparkdap", "run")
}

// PathFor is the default control socket of the proxy whose IDE port is
// ideAddr (HOST:PORT): serve and capture derive the same one from the same
// address, and different ones from different ports.
func PathFor(ideAddr string) string {
	host, port, err := net.SplitHostPort(ideAddr)
	if err != nil {
		host, port = ideAddr, ""
	}
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
				return r
			}
			return '_'
		}, s)
	}
	return filepath.Join(Dir(), "ide-"+clean(host)+"-"+clean(port)+".sock")
}

// Errors of Listen.
var (
	// ErrUnsafeDir: the socket's directory is not safely the user's.
	ErrUnsafeDir = errors.New("unsafe control socket directory")
	// ErrInUse: a live server answers on the socket already.
	ErrInUse = errors.New("another sparkdap serve answers there")
	// ErrNotSocket: something else than a socket has the socket's name.
	ErrNotSocket = errors.New("exists and is not a socket: not replacing it")
)

// privateDir makes dir (and its missing parents) and checks that dir is
// a real directory, not a link, owned by this user; its mode is set to
// 0700. A directory that fails the check is left alone and refused.
func privateDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 || !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory (a link is not followed)", ErrUnsafeDir, dir)
	}
	if err := ownedByMe(fi); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnsafeDir, dir, err)
	}
	if fi.Mode().Perm() != 0o700 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// Listen opens the control socket at path: in a private directory (the
// user's own, mode 0700, not a link; made so if missing or looser), mode
// 0600. A socket left there by a server that died is replaced; one a live
// server answers on is not (ErrInUse), nor anything else (ErrNotSocket).
func Listen(path string) (net.Listener, error) {
	if err := privateDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("%s %w", path, ErrNotSocket)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: %w", path, ErrInUse)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	// The directory is already 0700; the socket's own mode says the same.
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}
