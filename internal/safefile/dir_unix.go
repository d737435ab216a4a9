//go:build unix

package safefile

import (
	"io/fs"
	"os"
	"syscall"
)

// owners is the uid owning fi and the effective uid sparkdap runs as.
func owners(fi fs.FileInfo) (owner, me int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), os.Geteuid(), true
}

// writableByOthers: the group or others may write to fi.
func writableByOthers(fi fs.FileInfo) bool { return fi.Mode().Perm()&0o022 != 0 }
