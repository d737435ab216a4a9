package pycharm

import (
	"github.com/sparkdap/sparkdap/pathmap"
)

// pathRewriter translates one executor's paths through its pathmap.Cache:
// PyCharm's local breakpoint files to the paths the executor may know them
// by, and the executor's frame files back to local files. A nil mapper
// passes paths through (serve --no-path-mapping). It is safe for concurrent
// use (the Cache's own leaf lock); the Proxy calls it under p.mu.
type pathRewriter struct {
	c *pathmap.Cache
}

func newPathRewriter(paths *pathmap.Mapper, roots *pathmap.Roots) *pathRewriter {
	var r pathmap.Roots
	if roots != nil {
		r = *roots
	}
	return &pathRewriter{c: pathmap.NewCache(paths, r)}
}

// toRemote lists the executor paths to set a breakpoint in local on; the
// local path itself when the mapper has no candidate.
func (r *pathRewriter) toRemote(local string) []string {
	if c := r.c.ToRemote(local); len(c) > 0 {
		return c
	}
	return []string{local}
}

// toLocal maps an executor's frame file to the local file, or returns it
// unchanged when no local file fits.
func (r *pathRewriter) toLocal(remote string) string {
	if remote == "" || remote[0] == '<' {
		return remote
	}
	if res, _ := r.c.ToLocal(remote); res.Err == nil {
		return res.Mapping.Local
	}
	return remote
}

// mappedLocal is the local file path mapping gives remote, "" when none
// does (never remote itself: a capture's localFile must come from the
// mapping).
func (r *pathRewriter) mappedLocal(remote string) string {
	if remote == "" || remote[0] == '<' {
		return ""
	}
	if res, _ := r.c.ToLocal(remote); res.Err == nil {
		return res.Mapping.Local
	}
	return ""
}
