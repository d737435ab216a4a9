package control

import (
	"fmt"
	"path/filepath"
	"runtime"
)

// PathTooLongError: a Unix socket's path must fit the OS's sockaddr_un
// (sun_path, NUL included), and Path does not. Fix says what to do.
type PathTooLongError struct {
	Path     string
	OS       string
	Len, Max int
	Fix      string
}

func (e *PathTooLongError) Error() string {
	return fmt.Sprintf("control socket %s is %d bytes, longer than the %d a Unix socket's path may be on %s: %s",
		e.Path, e.Len, e.Max, e.OS, e.Fix)
}

// maxSocketPath is the longest path a Unix socket may have on goos, in
// bytes: its sun_path less the NUL, as Go's syscall checks it (108 bytes
// on Linux and in Windows' afunix.h, 104 on macOS and the BSDs). 0: no
// limit known here, net.Listen says.
func maxSocketPath(goos string) int {
	switch goos {
	case "linux", "android", "windows":
		return 107
	case "darwin", "ios", "freebsd", "netbsd", "openbsd", "dragonfly":
		return 103
	}
	return 0
}

// checkSocketPath refuses a socket path too long for goos, which net.Listen
// and Dial would refuse too, with "invalid argument" only. A path in the
// default directory (dflt) is made shorter by moving that directory.
func checkSocketPath(path, goos string, dflt bool) error {
	max := maxSocketPath(goos)
	if max == 0 || len(path) <= max {
		return nil
	}
	fix := "give a shorter path"
	if dflt {
		fix = "set XDG_RUNTIME_DIR to a shorter directory of your own, or give a shorter path"
	}
	return &PathTooLongError{Path: path, OS: osName(goos), Len: len(path), Max: max, Fix: fix}
}

// checkPath is checkSocketPath on this OS.
func checkPath(path string) error {
	base, rel := root()
	return checkSocketPath(path, runtime.GOOS, filepath.Dir(filepath.Clean(path)) == filepath.Join(base, rel))
}

// osName is how the user knows goos.
func osName(goos string) string {
	switch goos {
	case "darwin":
		return "macOS"
	case "linux":
		return "Linux"
	case "windows":
		return "Windows"
	}
	return goos
}
