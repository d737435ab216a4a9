package doctor

// The executors' Python as the job chooses it: spark.pyspark.python (given
// to doctor as the job's own --conf), possibly inside one of the job's
// --archives, which doctor unpacks to check.

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/sparkdap/sparkdap/internal/shellquote"
	"golang.org/x/crypto/ssh"
)

// ConfPySparkPython is the setting that chooses the Python of the driver and
// the executors' workers (spark.executorEnv.PYSPARK_PYTHON does not).
const ConfPySparkPython = "spark.pyspark.python"

// jobConf returns the value of one of the job's --conf settings given to
// doctor, the last one winning as in spark-submit.
func (f *Config) jobConf(key string) (string, bool) {
	value, found := "", false
	for _, kv := range f.Confs {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.TrimSpace(k) == key {
			value, found = v, true
		}
	}
	return value, found
}

// archiveFor finds, among the job's --archives, the one a relative
// interpreter path such as ./pyenv/bin/python lives in: the archive unpacked
// as the path's first directory (FILE#ALIAS, else FILE's own name). It
// returns the archive and the path inside it.
func (f *Config) archiveFor(py string) (archive, inside string, ok bool) {
	rel := strings.TrimPrefix(path.Clean(py), "./")
	first, rest, cut := strings.Cut(rel, "/")
	if !cut || path.IsAbs(py) {
		return "", "", false
	}
	for _, list := range f.Archives {
		for _, a := range strings.Split(list, ",") {
			a = strings.TrimSpace(a)
			file, alias, hasAlias := strings.Cut(a, "#")
			if !hasAlias {
				alias = path.Base(file)
			}
			if a != "" && alias == first {
				return file, rest, true
			}
		}
	}
	return "", "", false
}

// checkArchivePython checks an interpreter shipped in an archive: unpacked
// into a directory doctor removes when it ends, as executors unpack it into
// their working directory. It returns the unpacked interpreter's path.
func (d *doctor) checkArchivePython(ctx context.Context, py, why, archive, inside string) (string, bool) {
	name := fmt.Sprintf("executors' Python %s (%s, inside --archives %s)", py, why, archive)
	local := strings.TrimPrefix(archive, "file://")
	if strings.Contains(local, "://") {
		d.report(checkResult{name: name, v: vWarn,
			detail: "not checked: the archive is not a file on this machine, and doctor does not fetch it",
			fix:    "copy the archive here and pass its local path to doctor's --archives, or run doctor on a machine that has it"})
		return py, false
	}
	dir, err := os.MkdirTemp("", "sparkdap-doctor-")
	if err != nil {
		d.report(checkResult{name: name, v: vFail, detail: "no temp dir to unpack it in: " + err.Error()})
		return py, false
	}
	d.cleanup = append(d.cleanup, func() { os.RemoveAll(dir) })
	if err := unpackArchive(local, dir); err != nil {
		d.report(checkResult{name: name, v: vFail, detail: "cannot unpack it: " + err.Error(),
			fix: "pass the job's archive as spark-submit gets it (a .tar.gz, .tgz, .tar or .zip file made by venv-pack or conda-pack)"})
		return py, false
	}
	unpacked := filepath.Join(dir, filepath.FromSlash(inside))
	if _, err := os.Stat(unpacked); err != nil {
		d.report(checkResult{name: name, v: vFail, detail: fmt.Sprintf("the archive has no %s: %v", inside, err),
			fix: fmt.Sprintf("list it (tar tzf %s) and set %s to ./ALIAS/ and the interpreter's path inside it", shellquote.Quote(local), ConfPySparkPython)})
		return py, false
	}
	d.pyPacked = true
	return d.checkPythonAt(ctx, name+", unpacked here to check", unpacked, unpacked)
}

// maxUnpackBytes caps what doctor writes when it unpacks an archive: a
// packed conda environment is a few GiB, and a corrupt or hostile archive
// must not fill the disk.
var maxUnpackBytes int64 = 16 << 30 // a variable for tests

// unpackArchive unpacks a .tar.gz, .tgz, .tar or .zip into dir, refusing
// entries that would land outside it, entries that go through a symlink
// the archive made (a link to / and then etc/passwd), and more than
// maxUnpackBytes in all.
func unpackArchive(archive, dir string) error {
	u := &unpacker{dir: filepath.Clean(dir), budget: maxUnpackBytes}
	lower := strings.ToLower(archive)
	if strings.HasSuffix(lower, ".zip") || strings.HasSuffix(lower, ".jar") {
		zr, err := zip.OpenReader(archive)
		if err != nil {
			return err
		}
		defer zr.Close()
		for _, f := range zr.File {
			if f.FileInfo().IsDir() {
				if _, err := u.mkdir(f.Name, true); err != nil {
					return err
				}
				continue
			}
			p, err := u.mkdir(f.Name, false)
			if err != nil {
				return err
			}
			rc, err := f.Open()
			if err != nil {
				return err
			}
			err = u.writeFile(p, f.Name, rc, f.Mode().Perm())
			rc.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
	file, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer file.Close()
	var r io.Reader = file
	if !strings.HasSuffix(lower, ".tar") {
		gz, err := gzip.NewReader(file)
		if err != nil {
			return err
		}
		defer gz.Close()
		r = gz
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			_, err = u.mkdir(h.Name, true)
		case tar.TypeReg:
			var p string
			if p, err = u.mkdir(h.Name, false); err == nil {
				err = u.writeFile(p, h.Name, tr, os.FileMode(h.Mode).Perm())
			}
		case tar.TypeSymlink:
			// A venv's bin/python links to its base interpreter, as on
			// the executors: the link may point anywhere, but nothing is
			// ever written through it (mkdir refuses to).
			var p string
			if p, err = u.mkdir(h.Name, false); err == nil {
				if err = u.replace(p, h.Name); err == nil {
					err = os.Symlink(h.Linkname, p)
				}
			}
		}
		if err != nil {
			return err
		}
	}
}

// unpacker places an archive's entries under dir.
type unpacker struct {
	dir    string
	budget int64 // bytes still allowed
}

// mkdir makes the directories an entry needs under u.dir (the entry
// itself too when isDir) and returns the entry's path. Each directory on
// the way is made or checked with Lstat: one that is a symlink (the
// archive's own, made by an earlier entry) is refused, so no entry lands
// outside u.dir through it.
func (u *unpacker) mkdir(name string, isDir bool) (string, error) {
	p := filepath.Join(u.dir, filepath.FromSlash(name))
	if p == u.dir {
		return p, nil
	}
	if !strings.HasPrefix(p, u.dir+string(filepath.Separator)) {
		return "", fmt.Errorf("entry %q is outside the archive", name)
	}
	rel := strings.Split(strings.TrimPrefix(p, u.dir+string(filepath.Separator)), string(filepath.Separator))
	if !isDir {
		rel = rel[:len(rel)-1]
	}
	at := u.dir
	for _, c := range rel {
		at = filepath.Join(at, c)
		fi, err := os.Lstat(at)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(at, 0o755); err != nil {
				return "", err
			}
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink != 0:
			return "", fmt.Errorf("entry %q goes through the symlink %s the archive made: refused", name, strings.TrimPrefix(at, u.dir+string(filepath.Separator)))
		case !fi.IsDir():
			return "", fmt.Errorf("entry %q needs %s to be a directory, and the archive made it a file", name, strings.TrimPrefix(at, u.dir+string(filepath.Separator)))
		}
	}
	return p, nil
}

// replace clears the way for an entry whose path an earlier entry took:
// the later entry wins, as in the tar YARN's localizer runs (venv-pack
// 0.2.0 writes pyvenv.cfg twice). An earlier file or symlink is removed
// (a symlink itself, never what it points to); a directory is refused.
func (u *unpacker) replace(p, name string) error {
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("entry %q would replace the directory an earlier entry made: refused", name)
	}
	return os.Remove(p)
}

// writeFile writes one file entry, in place of an earlier entry of that
// path (replace); O_EXCL then refuses any path that exists again, a
// symlink included, so nothing is written through one.
func (u *unpacker) writeFile(p, name string, r io.Reader, perm os.FileMode) error {
	if err := u.replace(p, name); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm|0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(r, u.budget+1))
	u.budget -= n
	if err == nil && u.budget < 0 {
		err = fmt.Errorf("the archive unpacks to more than %d GiB (at entry %q): refused", maxUnpackBytes>>30, name)
	}
	if err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// checkGatewayPython runs the executors' Python on the gateway: with --ssh
// the cluster's nodes are beyond it, and the gateway has their software,
// not this machine.
func (d *doctor) checkGatewayPython(ctx context.Context, client *ssh.Client) {
	py, why := d.pythonFor()
	name := fmt.Sprintf("executors' Python %s (%s) on the gateway %s", py, why, d.f.Gateway.Dest)
	if _, _, ok := d.f.archiveFor(py); ok {
		d.report(checkResult{name: name, v: vSkip, detail: "it comes in the job's --archives, checked above"})
		return
	}
	sess, err := client.NewSession()
	if err != nil {
		d.report(checkResult{name: name, v: vFail, detail: "cannot open an SSH session: " + err.Error()})
		return
	}
	defer sess.Close()
	var stdout, stderr bytes.Buffer
	sess.Stdout, sess.Stderr = &stdout, &stderr
	ctx, cancel := context.WithTimeout(ctx, d.f.Timeout)
	defer cancel()
	done := make(chan error, 1) // the session's Close (deferred) ends Run if it is late
	go func() { done <- sess.Run(shellquote.Quote(py) + " -c " + shellquote.Quote(d.debuggerProbe())) }()
	var runErr error
	select {
	case runErr = <-done:
	case <-ctx.Done():
		runErr = fmt.Errorf("no answer within %s", d.f.Timeout)
	}
	if runErr != nil {
		detail := runErr.Error()
		if last := lastLine(stderr.String()); last != "" {
			detail = last
		}
		d.report(checkResult{name: name, v: vFail, detail: "cannot run the debugger check: " + detail,
			fix: fmt.Sprintf("set %s to the path of a working Python 3 on the cluster's nodes", ConfPySparkPython)})
		return
	}
	rep, ok := parseDebuggerReport(stdout.String())
	if !ok {
		d.report(checkResult{name: name, v: vFail, detail: fmt.Sprintf("unexpected answer %q", clean(stdout.String()))})
		return
	}
	d.report(d.debuggerResult(name, rep, rep.String(), func(req string) string {
		fix := fmt.Sprintf("on the cluster's nodes: %s -m pip install %s", shellquote.Quote(py), shellquote.Quote(req))
		if rep.kind == kindAbsent {
			fix += fmt.Sprintf(", or set %s to an interpreter that has it", ConfPySparkPython)
		}
		return fix
	}))
}
