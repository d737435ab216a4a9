package buildinfo

import (
	"regexp"
	"runtime/debug"
	"testing"
)

func TestString(t *testing.T) {
	base := Info{Version: "1.2.3", GoVersion: "go1.26.0", Platform: "darwin/arm64"}
	for _, tc := range []struct {
		name     string
		settings []debug.BuildSetting
		want     string
	}{
		{"no vcs", nil, "sparkdap 1.2.3 (commit unknown, go1.26.0, darwin/arm64)"},
		{"clean", []debug.BuildSetting{{Key: "vcs.revision", Value: "97dd26e1c2a3f00d4b5e6a7b8c9d0e1f2a3b4c5d"}, {Key: "vcs.modified", Value: "false"}},
			"sparkdap 1.2.3 (commit 97dd26e1c2a3, go1.26.0, darwin/arm64)"},
		{"modified", []debug.BuildSetting{{Key: "vcs.revision", Value: "97dd26e1c2a3f00d4b5e6a7b8c9d0e1f2a3b4c5d"}, {Key: "vcs.modified", Value: "true"}},
			"sparkdap 1.2.3 (commit 97dd26e1c2a3, modified, go1.26.0, darwin/arm64)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fromSettings(base, tc.settings).String(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// The version is what packaging and the wrapper's version check compare:
// semantic versioning, nothing else.
func TestVersionIsSemantic(t *testing.T) {
	if !regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(Version) {
		t.Fatalf("Version %q is not MAJOR.MINOR.PATCH[-pre]", Version)
	}
}

func TestReadNamesThisToolchain(t *testing.T) {
	info := Read()
	if info.Version != Version || info.GoVersion == "" || info.Platform == "" {
		t.Fatalf("Read() = %+v", info)
	}
}
