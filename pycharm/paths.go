package pycharm

import (
	"sync"

	"github.com/sparkdap/sparkdap/dap"
)

// pathRewriter translates one executor's paths with the shared PathMapper:
// PyCharm's local breakpoint files to the paths the executor may know them
// by, and the executor's frame files back to local files. A nil mapper
// passes paths through (serve --no-path-mapping).
type pathRewriter struct {
	paths *dap.PathMapper
	roots dap.Roots

	mu     sync.Mutex
	local  map[string]string   // executor path → local path ("" = unmapped)
	remote map[string][]string // local path → executor candidates
}

func newPathRewriter(paths *dap.PathMapper, roots *dap.Roots) *pathRewriter {
	r := &pathRewriter{paths: paths, local: map[string]string{}, remote: map[string][]string{}}
	if roots != nil {
		r.roots = *roots
	}
	return r
}

// toRemote lists the executor paths to set a breakpoint in local on.
func (r *pathRewriter) toRemote(local string) []string {
	if r.paths == nil {
		return []string{local}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.remote[local]; ok {
		return c
	}
	c := r.paths.ToRemote(local, r.roots)
	if len(c) == 0 {
		c = []string{local}
	}
	r.remote[local] = c
	return c
}

// toLocal maps an executor's frame file to the local file, or returns it
// unchanged when no local file fits.
func (r *pathRewriter) toLocal(remote string) string {
	if r.paths == nil || remote == "" || remote[0] == '<' {
		return remote
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, ok := r.local[remote]; ok {
		if l == "" {
			return remote
		}
		return l
	}
	m, err := r.paths.ToLocal(remote, r.roots)
	if err != nil {
		r.local[remote] = ""
		return remote
	}
	r.local[remote] = m.Local
	return m.Local
}
