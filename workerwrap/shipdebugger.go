package workerwrap

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sparkdap/sparkdap/internal/safefile"
)

// The debugger a job brings along, for executors whose Python has none the
// wrapper can use. One release for every Python Spark runs on: debugpy
// 1.8.21 is the newest whose pure-Python wheel (py2.py3-none-any, 5.4 MB)
// still declares Requires-Python >=3.8 (1.8.22 needs 3.10, and Spark 3.5
// executors may run 3.8 or 3.9), and it lists 3.10 to 3.14. Two wheels
// picked by Python version would double what every job ships for one
// Python release that 1.8.21 does not name yet.
const (
	ShippedDebugpyVersion = "1.8.21"
	ShippedDebugpyWheel   = "debugpy-" + ShippedDebugpyVersion + "-py2.py3-none-any.whl"
	// The wheel's digest as PyPI serves it: a cached or downloaded file
	// that differs is not shipped, whoever put it there.
	shippedDebugpySHA256 = "b1e37d333663c8851516a47364ef473da127f9caebe4417e6df6f5825a7e9a92"
)

// Values of --ship-debugger.
const (
	// ShipAuto ships the debugger; a worker uses it only when the
	// executors' Python has no debugger the wrapper can use.
	ShipAuto = "auto"
	// ShipAlways ships it and workers use it even over their own.
	ShipAlways = "always"
	// ShipNever ships nothing: the executors bring their own debugger.
	ShipNever = "never"
)

// EnvShipDebugger is the executor variable that tells the wrapper how to
// treat a shipped debugger: "always" prefers it to the executors' own,
// "never" ignores it; unset or "auto" uses it only when the executors'
// own is missing or unusable.
const EnvShipDebugger = "SPARKDAP_SHIP_DEBUGGER"

// ParseShipMode checks a --ship-debugger value.
func ParseShipMode(s string) (string, error) {
	switch s {
	case ShipAuto, ShipAlways, ShipNever:
		return s, nil
	}
	return "", &SettingError{Setting: "ShipDebugger", Value: s, Problem: "want auto, always or never", words: "ship debugger"}
}

// Shipped is the debugger a job ships next to the wrapper.
type Shipped struct {
	// Wheel is the path on the submitting machine of what ships ("":
	// nothing): debugpy's wheel, or for PyCharm the zip of the
	// pydevd-pycharm of the user's build (PyCharmArchive).
	Wheel string
	// Always makes workers use it even when their Python has a usable
	// debugger of its own (--ship-debugger always).
	Always bool
	// Never tells workers to ignore any wheel beside the wrapper
	// (--ship-debugger never): in local mode the wrapper's directory may
	// hold one from an earlier `sparkdap wrap`.
	Never bool
}

// WheelError says why the debugger wheel to ship could not be had.
type WheelError struct {
	Wheel   string // the file wanted
	Problem string // what went wrong, for people
	Err     error  // the cause, if any
}

func (e *WheelError) Error() string {
	msg := "debugger to ship (" + e.Wheel + "): " + e.Problem
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *WheelError) Unwrap() error { return e.Err }

// ErrNoPip: the laptop's Python cannot run pip, so the wheel cannot be
// downloaded.
var ErrNoPip = errors.New("no pip")

// DebuggerCacheDir is where sparkdap keeps the wheels it ships: a
// directory private to the user under the user's cache directory
// ($XDG_CACHE_HOME/sparkdap/debuggers, ~/.cache/sparkdap/debuggers),
// created 0700. A symlink there is refused, not followed: whoever could
// plant one would choose the code every debugged job runs.
func DebuggerCacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", &WheelError{Wheel: ShippedDebugpyWheel, Problem: "no cache directory", Err: err}
	}
	// Every level sparkdap made (sparkdap, sparkdap/debuggers) must be
	// the user's alone, not a link: safefile.MkdirPrivateIn checks them.
	dir, err := safefile.MkdirPrivateIn(base, filepath.Join("sparkdap", "debuggers"))
	if err != nil {
		return "", &WheelError{Wheel: ShippedDebugpyWheel, Problem: "cache directory", Err: err}
	}
	return dir, nil
}

// readWheel reads a wheel and checks its digest; a missing file is
// fs.ErrNotExist.
func readWheel(path string) ([]byte, error) {
	data, err := safefile.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != shippedDebugpySHA256 {
		return nil, fmt.Errorf("%s is not the wheel PyPI publishes (sha256 %x)", path, sum)
	}
	return data, nil
}

// DebugpyWheel returns the path of the debugpy wheel to ship, in cacheDir:
// the one already there, else one `python -m pip download` fetches (from
// pip's own cache when it has it). Errors are *WheelError; a Python
// without pip wraps ErrNoPip.
func DebugpyWheel(ctx context.Context, python, cacheDir string) (string, error) {
	path := filepath.Join(cacheDir, ShippedDebugpyWheel)
	if _, err := readWheel(path); err == nil {
		return path, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", &WheelError{Wheel: ShippedDebugpyWheel, Problem: "cached copy unusable (remove it to download it again)", Err: err}
	}
	tmp, err := os.MkdirTemp(cacheDir, ".download-")
	if err != nil {
		return "", &WheelError{Wheel: ShippedDebugpyWheel, Problem: "download directory", Err: err}
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, python, "-m", "pip", "download",
		"--disable-pip-version-check", "--no-input", "--quiet", "--no-deps",
		"--only-binary=:all:", "--platform", "any", "--python-version", "3.8", "--implementation", "py",
		"--dest", tmp, "debugpy=="+ShippedDebugpyVersion)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return "", pipError(python, cacheDir, stderr.String(), err)
	}
	data, err := readWheel(filepath.Join(tmp, ShippedDebugpyWheel))
	if err != nil {
		return "", &WheelError{Wheel: ShippedDebugpyWheel, Problem: "pip download", Err: err}
	}
	if err := safefile.WriteFile(path, data, 0o600); err != nil {
		return "", &WheelError{Wheel: ShippedDebugpyWheel, Problem: "caching it", Err: err}
	}
	return path, nil
}

// pipError says why pip download failed, with what to do instead.
func pipError(python, cacheDir, output string, err error) error {
	byHand := fmt.Sprintf("or download %s elsewhere into %s", ShippedDebugpyWheel, cacheDir)
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return &WheelError{Wheel: ShippedDebugpyWheel, Problem: python + " not found (install Python 3 with pip, " + byHand + ")", Err: err}
	}
	if strings.Contains(output, "No module named pip") {
		return &WheelError{Wheel: ShippedDebugpyWheel, Problem: python + " has no pip (install it, " + byHand + ")", Err: ErrNoPip}
	}
	last := lastLine(output)
	if last == "" {
		last = err.Error()
	}
	return &WheelError{
		Wheel:   ShippedDebugpyWheel,
		Problem: fmt.Sprintf("pip download failed (offline? %s; or --ship-debugger never with a debugger on the executors)", byHand),
		Err:     fmt.Errorf("%s: %w", last, err),
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// PlaceWheel copies the wheel at src into dir (the wrapper's directory),
// where Spark ships it from and a local-mode daemon finds it; a copy
// already there is kept. Never writes through a symlink.
func PlaceWheel(src, dir string) (string, error) {
	return placeChecked(src, dir, readWheel)
}

// placeChecked copies src into dir unless a copy that read accepts is
// there already; read checks the file (digest, contents).
func placeChecked(src, dir string, read func(string) ([]byte, error)) (string, error) {
	dst := filepath.Join(dir, filepath.Base(src))
	if _, err := read(dst); err == nil {
		return dst, nil
	}
	data, err := read(src)
	if err != nil {
		return "", &WheelError{Wheel: filepath.Base(src), Problem: "reading it", Err: err}
	}
	if err := safefile.WriteFile(dst, data, 0o644); err != nil {
		return "", &WheelError{Wheel: filepath.Base(src), Problem: "placing it next to the wrapper", Err: err}
	}
	return dst, nil
}
