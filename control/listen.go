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

	"github.com/sparkdap/sparkdap/internal/safefile"
)

// Dir is the default control sockets' directory: sparkdap under
// $XDG_RUNTIME_DIR (the user's own, 0700, cleared at logout), else
// sparkdap/run under the user's cache directory, else (no $HOME, no
// $XDG_CACHE_HOME) sparkdap-<uid>/run under the shared temp directory.
func Dir() string {
	base, rel := root()
	return filepath.Join(base, rel)
}

// root splits Dir into the directory the user vouches for (base) and the
// directories under it that sparkdap makes and checks, every one (rel).
func root() (base, rel string) {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		return d, "sparkdap"
	}
	base, name := safefile.UserDir()
	return base, filepath.Join(name, "run")
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

// privateDir checks that dir, the directory of a control socket, is the
// user's alone (safefile.PrivateDir: not a link, the user's, writable by
// nobody else), with create making what is missing (0700) and dir 0700.
// In the default directory (Dir) that holds for every level sparkdap
// makes (sparkdap, sparkdap/run, sparkdap-<uid>/run), elsewhere for dir
// and the directories made on the way. A directory that fails is left
// alone and refused (ErrUnsafeDir).
func privateDir(dir string, create bool) error {
	var err error
	base, rel := root()
	switch {
	case filepath.Clean(dir) == filepath.Join(base, rel) && create:
		_, err = safefile.MkdirPrivateIn(base, rel)
		err = safefile.WithFix(err, "set XDG_RUNTIME_DIR to a directory of your own")
	case filepath.Clean(dir) == filepath.Join(base, rel):
		_, err = safefile.PrivateDirIn(base, rel)
		err = safefile.WithFix(err, "set XDG_RUNTIME_DIR to a directory of your own")
	case create:
		err = safefile.MkdirPrivate(dir)
	default:
		err = safefile.PrivateDir(dir)
	}
	if errors.Is(err, safefile.ErrUnsafeDir) {
		return fmt.Errorf("%w: %w", ErrUnsafeDir, err)
	}
	return err
}

// Listen opens the control socket at path: in a private directory (the
// user's own, mode 0700, not a link; made so if missing or looser), mode
// 0600. A socket left there by a server that died is replaced; one a live
// server answers on is not (ErrInUse), nor anything else (ErrNotSocket).
// A path too long for the OS is a *PathTooLongError.
func Listen(path string) (net.Listener, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	if err := privateDir(filepath.Dir(path), true); err != nil {
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
