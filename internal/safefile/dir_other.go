//go:build !unix

package safefile

import "io/fs"

// owners: elsewhere (Windows) a file has no uid; the directory's place
// (the user's own profile) is what keeps it the user's.
func owners(fs.FileInfo) (owner, me int, ok bool) { return 0, 0, false }

// writableByOthers: Windows' ACLs do not show in the mode bits.
func writableByOthers(fs.FileInfo) bool { return false }
