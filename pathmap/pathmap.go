package pathmap

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Roots are the places one executor loads code from, as its worker wrapper
// reports them: where Spark put shipped files, the worker's directory, its
// sys.path (zips included), the driver's script directory, which is where
// closures pickled from the driver's __main__ claim to live, and the other
// directories the code the worker unpickled names (current task's first).
type Roots struct {
	SparkFiles string   `json:"sparkFiles,omitempty"`
	Cwd        string   `json:"cwd,omitempty"`
	DriverDir  string   `json:"driverDir,omitempty"`
	CodeDirs   []string `json:"codeDirs,omitempty"`
	SysPath    []string `json:"sysPath,omitempty"`
}

// dirs lists the roots, most specific first, without duplicates.
func (r Roots) dirs() []string {
	seen := map[string]bool{}
	var out []string
	all := append(append([]string{r.DriverDir}, r.CodeDirs...), r.SparkFiles, r.Cwd)
	for _, d := range append(all, r.SysPath...) {
		if d == "" || isLibraryDir(d) {
			continue
		}
		d = strings.TrimRight(resolveRemote(d, r.Cwd), "/")
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// isLibraryDir tells sys.path entries that hold Python's and PySpark's own
// code, never the user's: trying user files there is wasted work.
func isLibraryDir(d string) bool {
	for _, m := range []string{"site-packages", "dist-packages", "/lib/python", "pyspark.zip", "py4j-"} {
		if strings.Contains(d, m) {
			return true
		}
	}
	return false
}

// Rule is an explicit REMOTE=LOCAL rule (serve's --map): a remote prefix, which may be a
// regular expression (for directories with generated names such as
// userFiles-<uuid>), and the local directory it stands for.
type Rule struct {
	Remote *regexp.Regexp // anchored at the start
	Local  string
	raw    string
	// literal is the remote prefix when it is not a regular expression;
	// only those rules can be applied backwards (local → remote).
	literal string
}

// regexMeta are the characters that make a rule's prefix a regular
// expression. A dot alone does not: it is everywhere in file names and
// matches itself either way.
const regexMeta = `[]()*+?{}|^$\`

// ParseRule parses REMOTE_PREFIX=LOCAL_PREFIX.
func ParseRule(s string) (Rule, error) {
	remote, local, ok := strings.Cut(s, "=")
	if !ok || remote == "" || local == "" {
		return Rule{}, &RuleError{Rule: s, Reason: "want REMOTE_PREFIX=LOCAL_PREFIX"}
	}
	expr, literal := regexp.QuoteMeta(remote), remote
	if strings.ContainsAny(remote, regexMeta) {
		expr, literal = remote, ""
	}
	re, err := regexp.Compile("^(?:" + expr + ")")
	if err != nil {
		return Rule{}, &RuleError{Rule: s, Reason: "bad regular expression", Err: err}
	}
	return Rule{Remote: re, Local: local, raw: s, literal: literal}, nil
}

func (r Rule) String() string { return r.raw }

// RuleError is a rule ParseRule cannot use. It names no flag: the caller
// that took the rule from one (cmd/sparkdap's --map) says which.
type RuleError struct {
	Rule   string // as given
	Reason string
	Err    error // the regular expression's error, if that was it
}

func (e *RuleError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%q: %s: %v", e.Rule, e.Reason, e.Err)
	}
	return fmt.Sprintf("%q: %s", e.Rule, e.Reason)
}

func (e *RuleError) Unwrap() error { return e.Err }

// ErrAmbiguous is returned when several local files fit a remote path
// equally well: sparkdap would rather show nothing than the wrong file.
var ErrAmbiguous = errors.New("ambiguous")

// AmbiguousError names the local files that fit a remote path equally
// well. It is ErrAmbiguous (errors.Is); its text says an explicit rule
// settles it, without naming the flag that gives one.
type AmbiguousError struct {
	Remote     string
	Candidates []string // sorted
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%s: %v: %d local files fit equally well: %s (add a mapping rule)",
		e.Remote, ErrAmbiguous, len(e.Candidates), strings.Join(e.Candidates, ", "))
}

func (e *AmbiguousError) Is(target error) bool { return target == ErrAmbiguous }

// RootError is a local project root New cannot resolve.
type RootError struct {
	Root string
	Err  error
}

func (e *RootError) Error() string { return e.Root + ": " + e.Err.Error() }

func (e *RootError) Unwrap() error { return e.Err }

// ErrUnmapped is returned when no local file fits a remote path.
var ErrUnmapped = errors.New("no local file")

// Mapper translates between executor paths and the developer's local
// sources. Rules, in order: explicit rules (serve's --map); the executor's learned
// roots (a path under a root is looked up under the local project root);
// then the local file whose path shares the longest suffix with the remote
// path, if exactly one does.
//
// The index of local files is read when the Mapper is made, never by a
// lookup: front ends look paths up under their own locks, and reading a
// large tree (a home directory) takes seconds. A lookup that finds no file
// of the name asks for the tree to be read again in the background (at
// most one walk at a time, spaced by minRewalk and by rewalkFactor times the
// last walk's length), so files added while the proxy runs are found by
// later lookups.
//
// Locking: mu guards index and the walk bookkeeping; it is a leaf, held
// only to read or swap the index, never while reading the tree.
type Mapper struct {
	rules   []Rule
	root    string // local project root
	windows bool   // local paths are Windows paths: case-insensitive, backslashes
	files   func() ([]string, error)
	rewalk  bool // files can change: a miss may read them again (New)

	mu       sync.Mutex
	index    map[string][]string // lower-cased base name → local files
	walking  bool                // a background walk runs
	nextWalk time.Time           // no background walk starts before this

	// walks counts reads of the local tree, for tests.
	walks atomic.Int64
}

// New maps against the Python files under root on this machine. It reads
// the tree now (seconds for a large one), so that no lookup has to.
func New(root string, rules []Rule) (*Mapper, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, &RootError{Root: root, Err: err}
	}
	pm := &Mapper{rules: rules, root: abs, windows: filepath.Separator == '\\', rewalk: true}
	pm.files = func() ([]string, error) { return walkPython(abs) }
	start := time.Now()
	pm.index = pm.build()
	pm.nextWalk = time.Now().Add(max(minRewalk, rewalkFactor*time.Since(start)))
	return pm, nil
}

// Root is the local project root (serve's --root), absolute.
func (pm *Mapper) Root() string { return pm.root }

// NewForFiles maps against a fixed list of local files, in the given style
// (windows: case-insensitive, backslashes), instead of walking root; for
// tests, including other platforms' paths.
func NewForFiles(root string, windows bool, files []string, rules []Rule) *Mapper {
	pm := &Mapper{rules: rules, root: root, windows: windows,
		files: func() ([]string, error) { return files, nil }}
	pm.index = pm.build()
	return pm
}

// Background walks after a miss are at least minRewalk apart, and at
// least rewalkFactor times the last walk's length, so a tree that takes
// seconds to read is not read over and over while lookups miss (library
// files miss by nature).
const (
	minRewalk    = 5 * time.Second
	rewalkFactor = 20
)

// skipDirs are never searched for sources: they hold copies or nothing.
var skipDirs = map[string]bool{".git": true, "node_modules": true, "__pycache__": true, ".venv": true,
	"venv": true, ".tox": true, ".mypy_cache": true, "site-packages": true}

// maxIndexedFiles bounds the local index, so pointing --root at / does not
// stall the proxy.
const maxIndexedFiles = 200000

func walkPython(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable corners of a tree are not fatal
		}
		if d.IsDir() {
			if p != root && (skipDirs[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".py") {
			out = append(out, p)
			if len(out) >= maxIndexedFiles {
				return fs.SkipAll
			}
		}
		return nil
	})
	return out, err
}

// build reads the local files into a new index. It takes no lock.
func (pm *Mapper) build() map[string][]string {
	pm.walks.Add(1)
	index := map[string][]string{}
	files, _ := pm.files()
	for _, f := range files {
		k := strings.ToLower(pm.base(f))
		index[k] = append(index[k], f)
	}
	return index
}

// Refresh reads the local tree again now and replaces the index.
func (pm *Mapper) Refresh() {
	index := pm.build()
	pm.mu.Lock()
	pm.index = index
	pm.mu.Unlock()
}

// lookup lists the indexed local files named base (case-insensitively). It
// never reads the tree: a miss starts a background walk (rewalkLocked).
func (pm *Mapper) lookup(base string) []string {
	pm.mu.Lock()
	defer pm.mu.Unlock()
	cands := pm.index[strings.ToLower(base)]
	if len(cands) == 0 && pm.rewalk {
		pm.rewalkLocked()
	}
	return cands
}

// rewalkLocked starts a background walk unless one runs or the last ended
// too recently.
func (pm *Mapper) rewalkLocked() {
	now := time.Now()
	if pm.walking || now.Before(pm.nextWalk) {
		return
	}
	pm.walking = true
	go func() {
		start := time.Now()
		index := pm.build()
		took := time.Since(start)
		pm.mu.Lock()
		defer pm.mu.Unlock()
		pm.index = index
		pm.walking = false
		pm.nextWalk = time.Now().Add(max(minRewalk, rewalkFactor*took))
	}()
}

// local-path helpers in the local style.

func (pm *Mapper) split(p string) []string {
	if pm.windows {
		p = strings.ReplaceAll(p, `\`, "/")
	}
	return strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
}

func (pm *Mapper) base(p string) string {
	parts := pm.split(p)
	if len(parts) == 0 {
		return ""
	}
	return parts[len(parts)-1]
}

func (pm *Mapper) join(dir string, rel []string) string {
	sep := "/"
	if pm.windows {
		sep = `\`
	}
	return strings.TrimRight(dir, `/\`) + sep + strings.Join(rel, sep)
}

func (pm *Mapper) same(a, b string) bool {
	if pm.windows {
		return strings.EqualFold(a, b)
	}
	return a == b
}

// under returns p's components below dir, if p is under dir (local style).
func (pm *Mapper) under(p, dir string) ([]string, bool) {
	pp, dp := pm.split(p), pm.split(dir)
	if len(pp) <= len(dp) {
		return nil, false
	}
	for i := range dp {
		if !pm.same(pp[i], dp[i]) {
			return nil, false
		}
	}
	return pp[len(dp):], true
}

// Mapping is the outcome of one remote → local translation, for the paths
// report.
type Mapping struct {
	Remote, Local, Rule string
}

// ToLocal finds the local file for an executor's path.
func (pm *Mapper) ToLocal(remote string, roots Roots) (Mapping, error) {
	remote = resolveRemote(remote, roots.Cwd)
	for _, r := range pm.rules {
		if loc := r.Remote.FindStringIndex(remote); loc != nil {
			rest := strings.Split(strings.Trim(remote[loc[1]:], "/"), "/")
			return Mapping{remote, pm.join(r.Local, rest), "--map " + r.raw}, nil
		}
	}
	parts := strings.Split(strings.Trim(remote, "/"), "/")
	for _, dir := range roots.dirs() {
		rel, ok := underRemote(remote, dir)
		if !ok {
			continue
		}
		rel = insideArchive(rel)
		if cands := pm.lookup(rel[len(rel)-1]); len(cands) > 0 {
			want := pm.join(pm.root, rel)
			for _, c := range cands {
				if pm.same(c, want) {
					return Mapping{remote, c, "root " + dir}, nil
				}
			}
		}
	}
	return pm.bySuffix(remote, insideArchive(parts))
}

// bySuffix picks the local file sharing the longest path suffix.
func (pm *Mapper) bySuffix(remote string, parts []string) (Mapping, error) {
	if len(parts) == 0 {
		return Mapping{}, fmt.Errorf("%s: %w", remote, ErrUnmapped)
	}
	cands := pm.lookup(parts[len(parts)-1])
	best, bestLen := []string(nil), 0
	for _, c := range cands {
		cp := pm.split(c)
		n := 0
		for n < len(cp) && n < len(parts) && pm.same(cp[len(cp)-1-n], parts[len(parts)-1-n]) {
			n++
		}
		switch {
		case n > bestLen:
			best, bestLen = []string{c}, n
		case n == bestLen && n > 0:
			best = append(best, c)
		}
	}
	switch len(best) {
	case 0:
		return Mapping{}, fmt.Errorf("%s: %w under %s", remote, ErrUnmapped, pm.root)
	case 1:
		return Mapping{remote, best[0], fmt.Sprintf("suffix match (%d components)", bestLen)}, nil
	}
	sort.Strings(best)
	return Mapping{}, &AmbiguousError{Remote: remote, Candidates: best}
}

// maxCandidates bounds how many executor paths one local file is tried as.
const maxCandidates = 48

// ToRemote lists the executor paths a local file may be known by there, most
// likely first: the path itself (same machine), reversed literal --map rules,
// and the file's path below the project root (and each shorter suffix of it)
// under each learned root and inside each zip on sys.path.
func (pm *Mapper) ToRemote(local string, roots Roots) []string {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if !seen[p] && len(out) < maxCandidates {
			seen[p] = true
			out = append(out, p)
		}
	}
	if !pm.windows {
		add(local)
	} else {
		local = pm.realCase(local)
	}
	for _, r := range pm.rules {
		if r.literal == "" {
			continue
		}
		if rel, ok := pm.under(local, r.Local); ok {
			add(strings.TrimRight(r.literal, "/") + "/" + strings.Join(rel, "/"))
		}
	}
	rel, ok := pm.under(local, pm.root)
	if !ok {
		parts := pm.split(local)
		if len(parts) == 0 {
			return out
		}
		rel = parts[len(parts)-1:]
	}
	for i := range rel {
		suffix := strings.Join(rel[i:], "/")
		for _, dir := range roots.dirs() {
			add(dir + "/" + suffix)
		}
	}
	return out
}

// realCase is a Windows local path with the case its file really has.
// Windows IDEs do not send paths the way the file system spells them:
// PyCharm lower-cases the whole path (and uses /), VS Code lower-cases the
// drive letter. Windows does not care, but the executor paths built from
// the path do: a Linux executor has /opt/run/Jobs/LoanCalc.py, never
// /opt/run/jobs/loancalc.py. The indexed local file (read from the file
// system) that is the same path but for case and separators gives the
// real spelling; a path with no such file is kept as it came.
func (pm *Mapper) realCase(local string) string {
	want := pm.split(local)
	if len(want) == 0 {
		return local
	}
	for _, c := range pm.lookup(want[len(want)-1]) {
		got := pm.split(c)
		if len(got) != len(want) {
			continue
		}
		same := true
		for i := range got {
			if !strings.EqualFold(got[i], want[i]) {
				same = false
				break
			}
		}
		if same {
			return c
		}
	}
	return local
}

// resolveRemote makes a worker-relative path (./deps.zip/pkg/mod.py, as real
// executors report zip imports) absolute against the worker's directory.
func resolveRemote(p, cwd string) string {
	if !strings.HasPrefix(p, "/") && cwd != "" && !strings.HasPrefix(p, "<") {
		return path.Join(cwd, p)
	}
	return path.Clean(p)
}

func underRemote(p, dir string) ([]string, bool) {
	dir = strings.TrimRight(dir, "/") + "/"
	if !strings.HasPrefix(p, dir) || len(p) == len(dir) {
		return nil, false
	}
	return strings.Split(p[len(dir):], "/"), true
}

// insideArchive drops the components up to and including a .zip or .egg:
// what follows is the path inside the archive, which is the one that matches
// the local tree.
func insideArchive(parts []string) []string {
	for i := len(parts) - 2; i >= 0; i-- {
		l := strings.ToLower(parts[i])
		if strings.HasSuffix(l, ".zip") || strings.HasSuffix(l, ".egg") || strings.HasSuffix(l, ".whl") {
			return parts[i+1:]
		}
	}
	return parts
}
