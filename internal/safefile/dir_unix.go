//go:build unix

package safefile

import (
	"io/fs"
	"os"
	"syscall"
)

// platform: a file has an owning uid, and its mode bits say who may write.
var platform = dirPolicy{owners: statOwners, modeBits: true}

// statOwners is the uid owning fi and the effective uid sparkdap runs as.
func statOwners(fi fs.FileInfo) (owner, me int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), os.Geteuid(), true
}
