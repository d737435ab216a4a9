package tunnel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/rs/zerolog"
	"github.com/sparkdap/sparkdap/internal/shellquote"
	"golang.org/x/crypto/ssh"
)

// DefaultAgentCacheDir is where uploaded agents live on the gateway: per
// user, keyed by checksum, so versions never overwrite each other and a
// second run reuses the first upload.
const DefaultAgentCacheDir = "~/.cache/sparkdap"

// maxRemoteOutput bounds what a helper command may print back.
const maxRemoteOutput = 64 << 10

// remotePath quotes a gateway path for sh, expanding a leading ~ to the
// remote user's home (a quoted ~ would not expand).
func remotePath(p string) string {
	switch {
	case p == "~":
		return `"$HOME"`
	case strings.HasPrefix(p, "~/"):
		return `"$HOME"/` + shellquote.Quote(p[2:])
	}
	return shellquote.Quote(p)
}

// shCommand runs script with sh whatever the remote login shell is.
func shCommand(script string) string { return "sh -c " + shellquote.Quote(script) }

// runRemote runs cmd on the gateway and returns its stdout; a failure
// carries its stderr.
func runRemote(ctx context.Context, client *ssh.Client, cmd string, stdin io.Reader) (string, error) {
	s, err := client.NewSession()
	if err != nil {
		return "", fmt.Errorf("open session: %w", err)
	}
	defer s.Close()
	var out, errOut limitedBuffer
	out.max, errOut.max = maxRemoteOutput, maxRemoteOutput
	s.Stdout, s.Stderr, s.Stdin = &out, &errOut, stdin
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	if err := s.Run(cmd); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if e := strings.TrimSpace(errOut.String()); e != "" {
			return out.String(), fmt.Errorf("%w: %s", err, e)
		}
		return out.String(), err
	}
	return out.String(), nil
}

type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// goPlatform maps `uname -sm` output to GOOS/GOARCH.
func goPlatform(uname string) (goos, goarch string, err error) {
	f := strings.Fields(uname)
	if len(f) != 2 {
		return "", "", fmt.Errorf("unexpected `uname -sm` output %q", uname)
	}
	goos = strings.ToLower(f[0])
	switch goos {
	case "linux", "darwin", "freebsd", "openbsd", "netbsd":
	default:
		return "", "", fmt.Errorf("unsupported gateway OS %q", f[0])
	}
	switch f[1] {
	case "x86_64", "amd64":
		goarch = "amd64"
	case "aarch64", "arm64", "aarch64_be":
		goarch = "arm64"
	case "i386", "i686":
		goarch = "386"
	case "armv6l", "armv7l", "arm":
		goarch = "arm"
	case "ppc64le", "s390x", "riscv64", "ppc64":
		goarch = f[1]
	default:
		return "", "", fmt.Errorf("unsupported gateway architecture %q", f[1])
	}
	return goos, goarch, nil
}

var (
	selfOnce sync.Once
	selfPath string
	selfSum  string
	selfErr  error
)

// self is this executable and its SHA-256.
func self() (path, sum string, err error) {
	selfOnce.Do(func() {
		selfPath, selfErr = os.Executable()
		if selfErr != nil {
			return
		}
		f, err := os.Open(selfPath)
		if err != nil {
			selfErr = err
			return
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			selfErr = err
			return
		}
		selfSum = hex.EncodeToString(h.Sum(nil))
	})
	return selfPath, selfSum, selfErr
}

// sumCmd prints a file's SHA-256 with whichever tool the gateway has.
// The leading space keeps "$(" + sumCmd from reading as "$((", arithmetic.
const sumCmd = ` (sha256sum "$f" 2>/dev/null || shasum -a 256 "$f") | cut -d" " -f1`

// ensureAgent returns a command path for the agent on the gateway: an
// explicit one, else sparkdap on the remote PATH, else this executable,
// uploaded once into cacheDir.
func ensureAgent(ctx context.Context, client *ssh.Client, explicit, cacheDir string, log zerolog.Logger) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if cacheDir == "" {
		cacheDir = DefaultAgentCacheDir
	}
	exe, sum, err := self()
	if err != nil {
		return "", fmt.Errorf("find own executable to upload: %w", err)
	}
	cached := remotePath(strings.TrimRight(cacheDir, "/") + "/sparkdap-" + sum)
	// One round trip answers all three questions.
	probe := `echo "uname $(uname -sm)"; ` +
		`p=$(command -v sparkdap 2>/dev/null) && echo "path $p"; ` +
		`f=` + cached + `; if [ -x "$f" ] && [ "$(` + sumCmd + `)" = ` + sum + ` ]; then echo "cached $f"; fi; true`
	out, err := runRemote(ctx, client, shCommand(probe), nil)
	if err != nil {
		return "", fmt.Errorf("probe gateway for an agent: %w", err)
	}
	var uname, onPath, inCache string
	for _, line := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch k {
		case "uname":
			uname = v
		case "path":
			onPath = v
		case "cached":
			inCache = v
		}
	}
	if onPath != "" {
		log.Info().Str("agent", onPath).Msg("using sparkdap found on the gateway's PATH")
		return onPath, nil
	}
	if inCache != "" {
		log.Info().Str("agent", inCache).Msg("using previously uploaded agent")
		return inCache, nil
	}
	goos, goarch, err := goPlatform(uname)
	if err != nil {
		return "", fmt.Errorf("cannot upload an agent: %w; install sparkdap on the gateway and pass --agent-path", err)
	}
	if goos != runtime.GOOS || goarch != runtime.GOARCH {
		return "", fmt.Errorf("the gateway is %s/%s but this sparkdap is %s/%s, so it cannot be uploaded: "+
			"install a %s/%s sparkdap on the gateway and pass --agent-path, or use --ssh-mode forward", goos, goarch, runtime.GOOS, runtime.GOARCH, goos, goarch)
	}
	f, err := os.Open(exe)
	if err != nil {
		return "", fmt.Errorf("open own executable: %w", err)
	}
	defer f.Close()
	dir := remotePath(strings.TrimRight(cacheDir, "/"))
	// Written to a temp name and renamed only once its checksum matches, so
	// a broken transfer never leaves a runnable half binary behind.
	upload := `set -e; umask 077; d=` + dir + `; mkdir -p "$d"; f="$d/.sparkdap-` + sum + `.$$"; ` +
		`trap 'rm -f "$f"' EXIT; cat > "$f"; s=$(` + sumCmd + `); ` +
		`if [ "$s" != ` + sum + ` ]; then echo "checksum mismatch after upload: got $s" >&2; exit 3; fi; ` +
		`chmod 700 "$f"; mv -f "$f" "$d/sparkdap-` + sum + `"; trap - EXIT; echo "uploaded $d/sparkdap-` + sum + `"`
	log.Info().Str("dir", cacheDir).Str("sha256", sum[:12]).Msg("uploading agent to the gateway")
	out, err = runRemote(ctx, client, shCommand(upload), f)
	if err != nil {
		return "", fmt.Errorf("upload agent to %s: %w", cacheDir, err)
	}
	path, ok := strings.CutPrefix(strings.TrimSpace(out), "uploaded ")
	if !ok {
		return "", fmt.Errorf("upload agent to %s: unexpected answer %q", cacheDir, out)
	}
	log.Info().Str("agent", path).Msg("agent uploaded")
	return path, nil
}
