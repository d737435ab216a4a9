//go:build unix

package control

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ownedByMe checks fi belongs to the user running sparkdap.
func ownedByMe(fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if int(st.Uid) != os.Getuid() {
		return fmt.Errorf("owned by uid %d, not by you (uid %d)", st.Uid, os.Getuid())
	}
	return nil
}
