//go:build !linux

package tunnel

import "syscall"

// waitReadable is a no-op off Linux: the copy then holds its buffer while
// blocked in Read, which costs memory per idle connection but is correct.
func waitReadable(syscall.RawConn) error { return nil }
