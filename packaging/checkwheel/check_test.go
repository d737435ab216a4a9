package main

import (
	"archive/zip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestWheelPlatform(t *testing.T) {
	for _, tc := range []struct{ name, want, err string }{
		{"sparkdap-0.3.0-py3-none-manylinux_2_17_x86_64.musllinux_1_1_x86_64.whl", "linux/amd64", ""},
		{"sparkdap-0.3.0-py3-none-manylinux_2_17_aarch64.musllinux_1_1_aarch64.whl", "linux/arm64", ""},
		{"sparkdap-0.3.0-py3-none-macosx_12_0_arm64.whl", "darwin/arm64", ""},
		{"sparkdap-0.3.0-py3-none-macosx_12_0_x86_64.whl", "darwin/amd64", ""},
		{"sparkdap-0.3.0-py3-none-win_amd64.whl", "windows/amd64", ""},
		{"sparkdap-0.3.0-py3-none-manylinux_2_17_x86_64.macosx_12_0_x86_64.whl", "", "tags name both"},
		{"sparkdap-0.3.0-py3-none-any.whl", "", "not one sparkdap builds"},
		{"sparkdap.whl", "", "not a wheel file name"},
	} {
		got, err := wheelPlatform(tc.name)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

// A wheel whose binary was built for another platform than its tag says
// is refused, read from the binary's header: this test's own executable
// stands for a binary built here.
func TestCheckWheelReadsTheHeader(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	here := runtime.GOOS + "/" + runtime.GOARCH
	tags := map[string]string{
		"linux/amd64": "manylinux_2_17_x86_64", "linux/arm64": "manylinux_2_17_aarch64",
		"darwin/arm64": "macosx_12_0_arm64", "darwin/amd64": "macosx_12_0_x86_64", "windows/amd64": "win_amd64",
	}
	tag, ok := tags[here]
	if !ok {
		t.Skipf("no wheel tag for %s", here)
	}
	other := "win_amd64"
	if here == "windows/amd64" {
		other = "manylinux_2_17_x86_64"
	}
	dir := t.TempDir()
	write := func(tag string) string {
		name := "sparkdap"
		if strings.HasPrefix(tag, "win_") {
			name += ".exe"
		}
		p := filepath.Join(dir, "sparkdap-0.3.0-py3-none-"+tag+".whl")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		z := zip.NewWriter(f)
		h := &zip.FileHeader{Name: "sparkdap/bin/" + name, Method: zip.Deflate}
		h.SetMode(0o755)
		w, err := z.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(self)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
		if err := z.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return p
	}
	rep, err := checkWheel(write(tag))
	if err != nil || rep.platform != here || rep.binarySize == 0 {
		t.Fatalf("a wheel tagged for this platform: %+v, %v", rep, err)
	}
	if _, err := checkWheel(write(other)); err == nil || !strings.Contains(err.Error(), "but its binary is built for "+here) {
		t.Fatalf("a wheel tagged %s holding a %s binary: %v", other, here, err)
	}
	if _, err := binaryPlatform([]byte("#!/bin/sh\n")); err == nil {
		t.Fatal("a shell script passed as a binary")
	}
}
