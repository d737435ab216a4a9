// Package safefile is how sparkdap writes files: never through or over a
// symbolic link, never into a file someone else created, never half written.
//
// The files sparkdap writes often sit where others have a say: launch.json
// and its backup inside a repository someone else may have committed
// symlinks to, the --ready-file in a shared directory such as /tmp. A plain
// os.WriteFile follows a symlink at the destination (a repository's
// .vscode/launch.json.bak -> ~/.bashrc gets ~/.bashrc overwritten) and
// writes into a file that already exists, keeping its owner and mode (a
// planted /tmp/ready.json.tmp, world-readable, receives the token).
//
// The decisions:
//   - A destination that is a symlink is refused with ErrSymlink, not
//     followed and not replaced: following it writes outside where the user
//     asked; replacing it silently breaks a link the user may have made on
//     purpose. The user sees which path and can remove the link.
//   - The data goes to a new temp file in the destination's directory,
//     created with O_CREATE|O_EXCL under a random name (os.CreateTemp), so
//     it is never a file or link that was there before, then is chmodded,
//     synced and renamed over the destination. rename(2) replaces a
//     directory entry and never follows a link there, so even a symlink
//     planted between the check and the rename is replaced, not written
//     through.
//   - Only the last path element is checked: the directories on the way are
//     the caller's to vouch for (macOS's /tmp is itself a symlink).
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrSymlink: the path is a symbolic link, which safefile neither follows
// nor replaces.
var ErrSymlink = errors.New("is a symbolic link; sparkdap does not write through or over links (remove it or point sparkdap at the real file)")

// ErrNotRegular: the path exists but is a directory, device, pipe or socket.
var ErrNotRegular = errors.New("exists and is not a regular file")

// check refuses a path that is a symlink or not a regular file. A missing
// path is fine.
func check(op, path string) (fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, &fs.PathError{Op: op, Path: path, Err: ErrSymlink}
	case !fi.Mode().IsRegular():
		return nil, &fs.PathError{Op: op, Path: path, Err: ErrNotRegular}
	}
	return fi, nil
}

// Lstat is os.Lstat, except that a symlink or non-regular file is an error
// (ErrSymlink, ErrNotRegular) and a missing file is (nil, nil).
func Lstat(path string) (fs.FileInfo, error) { return check("stat", path) }

// ReadFile reads path without following a symlink there: a link is
// ErrSymlink, a missing file the usual fs.ErrNotExist. It checks that the
// file it opened is the one it looked at, so a link swapped in meanwhile is
// caught too.
func ReadFile(path string) ([]byte, error) {
	fi, err := check("read", path)
	if err != nil {
		return nil, err
	}
	if fi == nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fs.ErrNotExist}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !os.SameFile(fi, opened) {
		return nil, &fs.PathError{Op: "read", Path: path, Err: errors.New("changed while being opened")}
	}
	return io.ReadAll(f)
}

// WriteFile replaces path by data with permissions perm (exactly perm: the
// umask does not apply). A symlink at path is refused (ErrSymlink), as is a
// directory or other non-regular file (ErrNotRegular). On any error path is
// unchanged and no temp file is left behind.
func WriteFile(path string, data []byte, perm fs.FileMode) (err error) {
	if _, err := check("write", path); err != nil {
		return err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	// CreateTemp opens with O_RDWR|O_CREATE|O_EXCL and mode 0600 under a
	// random name: O_EXCL fails on anything already there, a dangling
	// symlink included, so nobody can have prepared this file.
	tmp, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	syncDir(dir)
	return nil
}

// syncDir makes the rename durable where the OS allows it; some systems and
// file systems refuse to sync a directory, which only costs durability.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	d.Close()
}
