//go:build unix

package bench

import "syscall"

// openFilesLimit is the soft limit on open files (ulimit -n).
func openFilesLimit() uint64 {
	var rl syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	return uint64(rl.Cur)
}

// raiseOpenFiles raises the soft limit on open files to need when the hard
// limit allows, and returns the soft limit then in force.
func raiseOpenFiles(need uint64) uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || uint64(rl.Cur) >= need {
		return uint64(rl.Cur)
	}
	if uint64(rl.Max) >= need {
		rl.Cur = need
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	return uint64(rl.Cur)
}
