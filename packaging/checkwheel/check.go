package main

import (
	"archive/zip"
	"bytes"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// report is what checkWheel found in one wheel.
type report struct {
	name       string
	platform   string // GOOS/GOARCH of the binary, from its header
	binarySize int64
	wheelSize  int64
}

// platformOfTag maps a wheel platform tag to the GOOS/GOARCH a binary
// under it must be built for.
func platformOfTag(tag string) (string, error) {
	var goos, goarch string
	switch {
	case strings.HasPrefix(tag, "manylinux_"), strings.HasPrefix(tag, "musllinux_"):
		goos = "linux"
	case strings.HasPrefix(tag, "macosx_"):
		goos = "darwin"
	case strings.HasPrefix(tag, "win_"):
		goos = "windows"
	default:
		return "", fmt.Errorf("platform tag %q: not one sparkdap builds", tag)
	}
	switch {
	case strings.HasSuffix(tag, "_x86_64"), tag == "win_amd64":
		goarch = "amd64"
	case strings.HasSuffix(tag, "_aarch64"), strings.HasSuffix(tag, "_arm64"):
		goarch = "arm64"
	default:
		return "", fmt.Errorf("platform tag %q: unknown architecture", tag)
	}
	return goos + "/" + goarch, nil
}

// wheelPlatform returns the one GOOS/GOARCH every platform tag in a
// wheel's file name agrees on (name-version-python-abi-platform.whl,
// platform tags joined by dots).
func wheelPlatform(name string) (string, error) {
	parts := strings.Split(strings.TrimSuffix(filepath.Base(name), ".whl"), "-")
	if len(parts) < 5 {
		return "", fmt.Errorf("%s: not a wheel file name", name)
	}
	want := ""
	for _, tag := range strings.Split(parts[len(parts)-1], ".") {
		p, err := platformOfTag(tag)
		if err != nil {
			return "", err
		}
		if want != "" && p != want {
			return "", fmt.Errorf("%s: tags name both %s and %s", name, want, p)
		}
		want = p
	}
	return want, nil
}

// binaryPlatform reads GOOS/GOARCH from an executable's header.
func binaryPlatform(b []byte) (string, error) {
	r := bytes.NewReader(b)
	if f, err := elf.NewFile(r); err == nil {
		switch f.Machine {
		case elf.EM_X86_64:
			return "linux/amd64", nil
		case elf.EM_AARCH64:
			return "linux/arm64", nil
		}
		return "", fmt.Errorf("ELF for machine %v", f.Machine)
	}
	if f, err := macho.NewFile(r); err == nil {
		switch f.Cpu {
		case macho.CpuAmd64:
			return "darwin/amd64", nil
		case macho.CpuArm64:
			return "darwin/arm64", nil
		}
		return "", fmt.Errorf("Mach-O for CPU %v", f.Cpu)
	}
	if f, err := pe.NewFile(r); err == nil {
		switch f.Machine {
		case pe.IMAGE_FILE_MACHINE_AMD64:
			return "windows/amd64", nil
		case pe.IMAGE_FILE_MACHINE_ARM64:
			return "windows/arm64", nil
		}
		return "", fmt.Errorf("PE for machine %#x", f.Machine)
	}
	return "", errors.New("neither ELF, Mach-O nor PE")
}

func checkWheel(path string) (report, error) {
	rep := report{name: filepath.Base(path)}
	want, err := wheelPlatform(path)
	if err != nil {
		return rep, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return rep, err
	}
	rep.wheelSize = st.Size()
	z, err := zip.OpenReader(path)
	if err != nil {
		return rep, fmt.Errorf("%s: %w", path, err)
	}
	defer z.Close()
	binName := "sparkdap/bin/sparkdap"
	if strings.HasPrefix(want, "windows/") {
		binName += ".exe"
	}
	var bin *zip.File
	for _, f := range z.File {
		if strings.HasPrefix(f.Name, "sparkdap/bin/") {
			if f.Name != binName {
				return rep, fmt.Errorf("%s: holds %s; a %s wheel holds %s alone", rep.name, f.Name, want, binName)
			}
			bin = f
		}
	}
	if bin == nil {
		return rep, fmt.Errorf("%s: no %s", rep.name, binName)
	}
	if !strings.HasPrefix(want, "windows/") && bin.Mode()&0o111 == 0 {
		return rep, fmt.Errorf("%s: %s is not executable (mode %v)", rep.name, binName, bin.Mode())
	}
	rc, err := bin.Open()
	if err != nil {
		return rep, err
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return rep, fmt.Errorf("%s: %s: %w", rep.name, binName, err)
	}
	rep.binarySize = int64(len(b))
	got, err := binaryPlatform(b)
	if err != nil {
		return rep, fmt.Errorf("%s: %s: %w", rep.name, binName, err)
	}
	if got != want {
		return rep, fmt.Errorf("%s: tagged for %s, but its binary is built for %s", rep.name, want, got)
	}
	rep.platform = got
	return rep, nil
}
