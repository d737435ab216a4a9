package pathmap

import (
	"slices"
	"sort"
	"sync"
)

// Cache is one executor's view through a Mapper: its roots, the candidates
// each local file was tried as, and the outcome for each executor path seen,
// so each is computed once per executor. A nil Mapper passes paths through
// unchanged (serve --no-path-mapping); so does a nil *Cache.
//
// Locking: mu guards every field below it and is a leaf: a Cache calls
// nothing of its callers, so front ends call it under their own locks (the
// DAP Hub's mu, the PyCharm Proxy's mu). The Mapper it calls takes only its
// own index lock.
type Cache struct {
	m *Mapper

	mu       sync.Mutex
	roots    Roots
	remote   map[string][]string // local path → executor candidates
	local    map[string]Result   // executor path → its outcome
	remoteOf map[string]string   // local path → the executor path mapped to it
}

// Result is one executor path's outcome: a Mapping or why there is none.
type Result struct {
	Mapping Mapping
	Err     error
}

// NewCache starts an executor's cache with the roots its worker reported.
func NewCache(m *Mapper, roots Roots) *Cache {
	// Its maps are made on first use: there is one cache per executor
	// session, and an idle one may never translate a path.
	return &Cache{m: m, roots: roots}
}

// Mapper is the Mapper the cache asks; nil when paths pass through.
func (c *Cache) Mapper() *Mapper {
	if c == nil {
		return nil
	}
	return c.m
}

// Roots are the executor's current roots.
func (c *Cache) Roots() Roots {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.roots
}

// SetRoots takes the executor's new roots (a reused worker running another
// job's task) and reports whether they differ. Candidate lists, which
// follow from the roots alone, are recomputed; outcomes already seen for
// executor paths are kept (the DAP front end always kept them, and the
// paths report lists them).
func (c *Cache) SetRoots(r Roots) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rootsEqual(c.roots, r) {
		return false
	}
	c.roots = r
	clear(c.remote)
	return true
}

func rootsEqual(a, b Roots) bool {
	return a.SparkFiles == b.SparkFiles && a.Cwd == b.Cwd && a.DriverDir == b.DriverDir &&
		slices.Equal(a.CodeDirs, b.CodeDirs) && slices.Equal(a.SysPath, b.SysPath)
}

// ToRemote lists the executor paths a local file may be known by (see
// Mapper.ToRemote). Without a Mapper it is the file itself.
func (c *Cache) ToRemote(local string) []string {
	if c.Mapper() == nil {
		return []string{local}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.remote[local]; ok {
		return p
	}
	p := c.m.ToRemote(local, c.roots)
	if c.remote == nil {
		c.remote = map[string][]string{}
	}
	c.remote[local] = p
	return p
}

// ToLocal maps one executor path, once per path; fresh says this call
// computed it (for logging each outcome once). Without a Mapper every path
// is ErrUnmapped.
func (c *Cache) ToLocal(remote string) (r Result, fresh bool) {
	if c.Mapper() == nil {
		return Result{Err: ErrUnmapped}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.local[remote]; ok {
		return r, false
	}
	m, err := c.m.ToLocal(remote, c.roots)
	r = Result{m, err}
	if c.local == nil {
		c.local = map[string]Result{}
	}
	c.local[remote] = r
	if err == nil {
		if c.remoteOf == nil {
			c.remoteOf = map[string]string{}
		}
		c.remoteOf[m.Local] = remote
	}
	return r, true
}

// RemoteOf is the executor path a local path was mapped from, if one was.
func (c *Cache) RemoteOf(local string) (string, bool) {
	if c.Mapper() == nil {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.remoteOf[local]
	return r, ok
}

// Outcomes lists what ToLocal found: each mapping by remote path, and the
// error text of each path it could not map, sorted.
func (c *Cache) Outcomes() (mapped []Mapping, unmapped []string) {
	mapped, unmapped = []Mapping{}, []string{}
	if c.Mapper() == nil {
		return mapped, unmapped
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.local {
		if r.Err == nil {
			mapped = append(mapped, r.Mapping)
		} else {
			unmapped = append(unmapped, r.Err.Error())
		}
	}
	sort.Slice(mapped, func(i, j int) bool { return mapped[i].Remote < mapped[j].Remote })
	sort.Strings(unmapped)
	return mapped, unmapped
}
