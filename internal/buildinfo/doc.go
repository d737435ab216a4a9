// Package buildinfo says which sparkdap a binary is: the release version,
// kept in this package and nowhere else (scripts and packaging ask the
// binary, `sparkdap version --json`), and the commit and Go toolchain it
// was built from, which the Go linker records in every binary built from a
// git checkout (runtime/debug.ReadBuildInfo). Nothing is set with -ldflags,
// so a plain `go build` and a packaged wheel say the same.
package buildinfo
