package workerwrap

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
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/sparkdap/sparkdap/internal/safefile"
)

// The pydevd-pycharm a PyCharm job ships. JetBrains publishes it only as
// an sdist: pure Python, plus Cython speedups that are optional (pydevd
// runs without them, in pure-Python mode) and prebuilt for macOS and
// Windows only. A build's pydevd-pycharm must match the user's PyCharm,
// so there is no one release to pin and no digest to keep here: pip
// checks the sdist against the digest PyPI's index gives, and sparkdap
// then checks that it is a gzip tar of the release asked for.
//
// What ships is a zip sparkdap builds from the sdist, holding what `pip
// install` of it puts into site-packages, less the speedups: the Python
// modules and packages and their data files; no Cython extensions
// (prebuilt ones would have to match the executors' platform and Python,
// which the submitting machine cannot know), no C or Cython sources, none
// of the sdist's build files. The prebuilt helpers of
// pydevd_attach_to_process do ship, as they do in the pure debugpy wheel
// the job ships for DAP: one per OS and architecture, for any Python,
// which pydevd loads on Python 3.11 and older to trace the threads that
// already run when a worker attaches, and without which it prints
// "Expected: ... to exist." into the executor's log at every attach. A
// zip because the worker already unpacks one safely (shipped.py unpacks
// debugpy's wheel); unpacking a tar there would mean a second unpacker to
// keep safe.

// pycharmArchiveRE matches the zip's name (shipped.py's _PYCHARM_RE is
// the same pattern): pydevd_pycharm-<version>-sparkdap.zip.
var pycharmArchiveRE = regexp.MustCompile(`^pydevd_pycharm-([0-9]+(?:\.[0-9]+)+)-sparkdap\.zip$`)

// pycharmSdistRE matches the sdist pip downloads (older releases used the
// project's name with a dash).
var pycharmSdistRE = regexp.MustCompile(`^pydevd[_-]pycharm-([0-9]+(?:\.[0-9]+)+)\.tar\.gz$`)

var pycharmBuildNumbersRE = regexp.MustCompile(`^[0-9]+(?:\.[0-9]+)+$`)

// PyCharmArchiveName is the name of the zip shipped for the pydevd-pycharm
// of version.
func PyCharmArchiveName(version string) string {
	return "pydevd_pycharm-" + version + "-sparkdap.zip"
}

// matchesBuild: whether version is the build or a release of it
// (253.33813 names 253.33813.30; 253.33813.30 only itself and its
// 253.33813.30.x). pip's ==BUILD.* means the same; ~=BUILD would not: for
// 253.33813 it allows every 253.* from there on, another PyCharm's.
func matchesBuild(version, build string) bool {
	return version == build || strings.HasPrefix(version, build+".")
}

// newerVersion compares dotted numbers.
func newerVersion(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if x != y {
			return x > y
		}
	}
	return len(as) > len(bs)
}

// PyCharmArchive returns the path in cacheDir of the zip of the
// pydevd-pycharm of build (its numbers, as doctor.ParsePyCharmBuild
// gives them: 253.33813.30, or a partial 253.33813): the newest one of
// that build already there, else one built from the sdist that `python
// -m pip download` fetches. A cached zip is what the user got for that
// build before; naming the full build picks another release. Errors are
// *WheelError; a Python without pip wraps ErrNoPip.
func PyCharmArchive(ctx context.Context, python, cacheDir, build string) (string, error) {
	want := "pydevd-pycharm " + build
	if !pycharmBuildNumbersRE.MatchString(build) {
		return "", &WheelError{Wheel: want, Problem: "not a PyCharm build (want its numbers, e.g. 253.33813.30)"}
	}
	if p, err := cachedPyCharmArchive(cacheDir, build); err != nil || p != "" {
		return p, err
	}
	tmp, err := os.MkdirTemp(cacheDir, ".download-")
	if err != nil {
		return "", &WheelError{Wheel: want, Problem: "download directory", Err: err}
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, python, "-m", "pip", "download",
		"--disable-pip-version-check", "--no-input", "--quiet", "--no-deps",
		"--no-binary", ":all:", "--dest", tmp, "pydevd-pycharm=="+build+".*")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return "", pycharmPipError(python, cacheDir, build, stderr.String(), err)
	}
	version, sdist, err := downloadedSdist(tmp, build)
	if err != nil {
		return "", &WheelError{Wheel: want, Problem: "pip download", Err: err}
	}
	data, err := pycharmZipFromSdist(sdist, version)
	if err != nil {
		return "", &WheelError{Wheel: filepath.Base(sdist), Problem: "not a pydevd-pycharm sdist", Err: err}
	}
	dst := filepath.Join(cacheDir, PyCharmArchiveName(version))
	if err := safefile.WriteFile(dst, data, 0o600); err != nil {
		return "", &WheelError{Wheel: PyCharmArchiveName(version), Problem: "caching it", Err: err}
	}
	return dst, nil
}

// cachedPyCharmArchive: the newest zip of build in cacheDir ("" if none),
// checked.
func cachedPyCharmArchive(cacheDir, build string) (string, error) {
	entries, err := os.ReadDir(cacheDir)
	if err != nil {
		return "", &WheelError{Wheel: "pydevd-pycharm " + build, Problem: "cache directory " + cacheDir, Err: err}
	}
	best := ""
	for _, e := range entries {
		m := pycharmArchiveRE.FindStringSubmatch(e.Name())
		if m == nil || !matchesBuild(m[1], build) {
			continue
		}
		if best == "" || newerVersion(m[1], pycharmArchiveRE.FindStringSubmatch(best)[1]) {
			best = e.Name()
		}
	}
	if best == "" {
		return "", nil
	}
	p := filepath.Join(cacheDir, best)
	if _, err := readPyCharmArchive(p); err != nil {
		return "", &WheelError{Wheel: best, Problem: "cached copy unusable (remove it to download it again)", Err: err}
	}
	return p, nil
}

// downloadedSdist finds the one sdist pip put in dir and checks that its
// release is of build.
func downloadedSdist(dir, build string) (version, path string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", "", err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 1 {
		return "", "", fmt.Errorf("pip left %q, want one pydevd-pycharm sdist", names)
	}
	m := pycharmSdistRE.FindStringSubmatch(names[0])
	if m == nil {
		return "", "", fmt.Errorf("pip left %s, not a pydevd-pycharm sdist (pydevd_pycharm-<build>.tar.gz)", names[0])
	}
	if !matchesBuild(m[1], build) {
		return "", "", fmt.Errorf("pip left %s, not a release of build %s", names[0], build)
	}
	return m[1], filepath.Join(dir, names[0]), nil
}

// Endings of what is compiled, or only there to compile it.
var compiledSuffixes = []string{".so", ".pyd", ".dll", ".dylib", ".exe", ".lib", ".o", ".a",
	".c", ".cpp", ".cc", ".h", ".hpp", ".pyx", ".pxd"}

// sdistOnly are the sdist's top-level files that `pip install` does not
// install: its build files and metadata.
var sdistOnly = map[string]bool{
	"setup.py": true, "setup_cython.py": true, "setup.cfg": true, "pyproject.toml": true,
	"PKG-INFO": true, "MANIFEST.in": true,
}

// pycharmZipFromSdist reads the sdist (a gzip tar whose members all lie
// in pydevd_pycharm-<version>/, only files and directories, its PKG-INFO
// naming pydevd-pycharm <version>) and returns the zip that ships.
func pycharmZipFromSdist(sdist, version string) ([]byte, error) {
	raw, err := safefile.ReadFile(sdist)
	if err != nil {
		return nil, err
	}
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not gzip: %w", err)
	}
	tops := []string{"pydevd_pycharm-" + version + "/", "pydevd-pycharm-" + version + "/"}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	var names []string
	var pkgInfo []byte
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not a tar: %w", err)
		}
		rel := ""
		for _, top := range tops {
			if r, ok := strings.CutPrefix(h.Name, top); ok && r != "" {
				rel = r
			} else if ok || h.Name == strings.TrimSuffix(top, "/") {
				rel = "." // the top directory itself
			}
		}
		if rel == "" || strings.Contains(h.Name, "\\") || path.Clean(h.Name) != strings.TrimSuffix(h.Name, "/") {
			return nil, fmt.Errorf("member %q lies outside %s", h.Name, tops[0])
		}
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		default:
			return nil, fmt.Errorf("member %q is not a regular file (a link?)", h.Name)
		}
		if rel == "PKG-INFO" {
			if pkgInfo, err = io.ReadAll(io.LimitReader(tr, 1<<20)); err != nil {
				return nil, err
			}
		}
		if !shippedFile(rel) {
			continue
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: rel, Method: zip.Deflate, Modified: h.ModTime})
		if err != nil {
			return nil, err
		}
		if _, err := io.Copy(w, tr); err != nil {
			return nil, fmt.Errorf("reading %s: %w", h.Name, err)
		}
		names = append(names, rel)
	}
	if err := checkPkgInfo(pkgInfo, version); err != nil {
		return nil, err
	}
	if err := hasPydevd(names); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// attachHelperRE matches pydevd's prebuilt attach helpers, the only
// binaries that ship.
var attachHelperRE = regexp.MustCompile(`^pydevd_attach_to_process/[A-Za-z0-9_]+\.(?:so|dll|dylib)$`)

// shippedFile: whether rel (a path inside the sdist) ships: installed by
// pip, and neither a speedup nor its source.
func shippedFile(rel string) bool {
	if sdistOnly[rel] {
		return false
	}
	first, _, _ := strings.Cut(rel, "/")
	if strings.HasSuffix(first, ".egg-info") {
		return false
	}
	if attachHelperRE.MatchString(rel) {
		return true
	}
	for _, s := range compiledSuffixes {
		if strings.HasSuffix(strings.ToLower(rel), s) {
			return false
		}
	}
	return true
}

func checkPkgInfo(pkgInfo []byte, version string) error {
	if pkgInfo == nil {
		return errors.New("no PKG-INFO")
	}
	var name, ver string
	for _, line := range strings.Split(string(pkgInfo), "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" {
			break // the headers end
		}
		if v, ok := strings.CutPrefix(line, "Name: "); ok {
			name = strings.TrimSpace(v)
		} else if v, ok := strings.CutPrefix(line, "Version: "); ok {
			ver = strings.TrimSpace(v)
		}
	}
	if strings.ReplaceAll(strings.ToLower(name), "_", "-") != "pydevd-pycharm" || ver != version {
		return fmt.Errorf("PKG-INFO names %q %q, want pydevd-pycharm %s", name, ver, version)
	}
	return nil
}

// hasPydevd: what the wrapper imports is at the archive's top.
func hasPydevd(names []string) error {
	sort.Strings(names)
	for _, want := range []string{"pydevd.py", "pydevd_pycharm.py"} {
		if i := sort.SearchStrings(names, want); i == len(names) || names[i] != want {
			return fmt.Errorf("no %s", want)
		}
	}
	return nil
}

// readPyCharmArchive reads a zip built by PyCharmArchive and checks it
// still is one: a zip of safe relative names, no speedups, pydevd
// and pydevd_pycharm at its top. A missing file is fs.ErrNotExist.
func readPyCharmArchive(p string) ([]byte, error) {
	data, err := safefile.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if !pycharmArchiveRE.MatchString(filepath.Base(p)) {
		return nil, fmt.Errorf("%s is not named as sparkdap names a pydevd-pycharm zip", p)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	var names []string
	for _, f := range zr.File {
		if !fs.ValidPath(f.Name) || strings.Contains(f.Name, "\\") || !f.Mode().IsRegular() || !shippedFile(f.Name) {
			return nil, fmt.Errorf("%s holds %q, which sparkdap never puts there", p, f.Name)
		}
		names = append(names, f.Name)
	}
	if err := hasPydevd(names); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return data, nil
}

// pycharmPipError says why pip download failed, with what to do instead.
func pycharmPipError(python, cacheDir, build, output string, err error) error {
	want := "pydevd-pycharm " + build
	byHand := "or pip install 'pydevd-pycharm==" + build + ".*' on the executors and pass --ship-debugger never"
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return &WheelError{Wheel: want, Problem: python + " not found (install Python 3 with pip, " + byHand + ")", Err: err}
	}
	if strings.Contains(output, "No module named pip") {
		return &WheelError{Wheel: want, Problem: python + " has no pip (install it, " + byHand + ")", Err: ErrNoPip}
	}
	last := lastLine(output)
	if last == "" {
		last = err.Error()
	}
	return &WheelError{
		Wheel:   want,
		Problem: fmt.Sprintf("pip download failed (offline, or no such build? %s; the cache is %s)", byHand, cacheDir),
		Err:     fmt.Errorf("%s: %w", last, err),
	}
}

// PlacePyCharmArchive copies the zip at src (from PyCharmArchive) into dir,
// the wrapper's directory, as PlaceWheel does the debugpy wheel.
func PlacePyCharmArchive(src, dir string) (string, error) {
	return placeChecked(src, dir, readPyCharmArchive)
}
