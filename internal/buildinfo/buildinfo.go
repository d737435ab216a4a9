package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is sparkdap's release version (semantic versioning, no leading v).
const Version = "0.3.0"

// Info describes one binary.
type Info struct {
	Version string `json:"version"`
	// Commit is the git commit the binary was built from, "" when the Go
	// toolchain recorded none (built outside a checkout, or -buildvcs=false).
	Commit string `json:"commit"`
	// Modified is true when the checkout had uncommitted changes.
	Modified  bool   `json:"modified"`
	GoVersion string `json:"go"`
	Platform  string `json:"platform"` // GOOS/GOARCH
}

// Read returns this binary's Info.
func Read() Info {
	info := Info{Version: Version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		info = fromSettings(info, bi.Settings)
	}
	return info
}

func fromSettings(info Info, settings []debug.BuildSetting) Info {
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String is the one line `sparkdap version` prints, e.g.
// "sparkdap 0.3.0 (commit 97dd26e1c2a3, go1.26.0, linux/amd64)".
func (i Info) String() string {
	commit := "commit unknown"
	if i.Commit != "" {
		c := i.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		commit = "commit " + c
		if i.Modified {
			commit += ", modified"
		}
	}
	return fmt.Sprintf("sparkdap %s (%s, %s, %s)", i.Version, commit, i.GoVersion, i.Platform)
}
