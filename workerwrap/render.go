package workerwrap

import (
	"bufio"
	"bytes"
	"compress/zlib"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/sparkdap/sparkdap/internal/buildinfo"
	"github.com/sparkdap/sparkdap/internal/safefile"
)

//go:embed template/header.py.tmpl
var headerSource string

var header = template.Must(template.New("header.py.tmpl").
	Funcs(template.FuncMap{"py": pyLiteral}).
	Option("missingkey=error").
	Parse(headerSource))

// templateData is Options in the units the Python side wants.
type templateData struct {
	IDE              string
	Proxy            string
	TokenEnv         string
	Token            *string
	Partitions       []int
	Stages           []int
	SampleRate       float64
	ConnectTimeout   float64
	HandshakeTimeout float64
	Wait             bool
	PostMortem       bool
	Lease            float64
	ProxyBackoff     float64
	PyCharm          bool // the header's comment says pydevd-pycharm; the module reads IDE
	// SparkdapVersion is the sparkdap that wrote the file: its workers say
	// it in their hellos, so that `sparkdap doctor` can tell a job still
	// running another release's wrapper from one running serve's.
	SparkdapVersion string
}

// Render writes the Python source of remote_debug.py for o to w.
func Render(w io.Writer, o Options) error {
	if err := o.Validate(); err != nil {
		return fmt.Errorf("invalid wrapper options: %w", err)
	}
	d := templateData{
		IDE:              o.IDE,
		Proxy:            o.Proxy,
		TokenEnv:         o.TokenEnv,
		Partitions:       o.Partitions,
		Stages:           o.Stages,
		SampleRate:       o.SampleRate,
		ConnectTimeout:   seconds(o.ConnectTimeout),
		HandshakeTimeout: seconds(o.HandshakeTimeout),
		Wait:             o.Wait,
		PostMortem:       o.PostMortem,
		Lease:            seconds(o.Lease),
		ProxyBackoff:     seconds(o.ProxyBackoff),
		PyCharm:          o.IDE == IDEPyCharm,
		SparkdapVersion:  buildinfo.Version,
	}
	if o.Token != "" {
		d.Token = &o.Token
	}
	var buf bytes.Buffer
	if err := header.Execute(&buf, d); err != nil {
		return fmt.Errorf("render %s: %w", FileName, err)
	}
	buf.Write(moduleSource)
	_, err := w.Write(buf.Bytes())
	return err
}

// ProbeArgs are the arguments that make a Python interpreter run `sparkdap
// doctor`'s test worker: the worker module's own hello client, then
// debugpy.connect to host:port, reading the token from its stdin's first
// line (see _probe in python/remote_debug/probe.py). The module travels on the
// command line, so that the probe needs nothing installed where it runs.
func ProbeArgs(host, port string) []string {
	return []string{"-c", probeProgram, "--sparkdap-probe", host, port}
}

// probeProgram is the module as a -c program, compressed: Linux refuses
// any one argument over 128 KiB (MAX_ARG_STRLEN), which the module's
// source passes, and a remote probe's command line goes through a shell
// with the same limit. It runs as __main__, as the module itself would.
var probeProgram = mustProbeProgram(moduleSource)

func mustProbeProgram(src []byte) string {
	var z bytes.Buffer
	w, err := zlib.NewWriterLevel(&z, zlib.BestCompression)
	if err != nil {
		panic(err)
	}
	if _, err := w.Write(src); err != nil {
		panic(err)
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	prog := "import base64, zlib\nexec(compile(zlib.decompress(base64.b64decode(\"" +
		base64.StdEncoding.EncodeToString(z.Bytes()) + "\")), \"<sparkdap probe>\", \"exec\"))\n"
	if len(prog) >= maxArgBytes {
		panic(fmt.Sprintf("the probe program is %d bytes, over an argument's %d", len(prog), maxArgBytes))
	}
	return prog
}

// maxArgBytes is Linux's bound on one argument (MAX_ARG_STRLEN).
const maxArgBytes = 128 << 10

// WriteFile renders the wrapper to path. The file is private to its owner
// when it embeds a token.
func WriteFile(path string, o Options) error {
	var buf bytes.Buffer
	if err := Render(&buf, o); err != nil {
		return err
	}
	perm := os.FileMode(0o644)
	if o.Token != "" {
		perm = 0o600
	}
	// safefile writes a temp file and renames it, so that a Spark job
	// starting meanwhile never imports a half-written module, and neither
	// follows nor replaces a symlink at path.
	if err := safefile.WriteFile(path, buf.Bytes(), perm); err != nil {
		return fmt.Errorf("write wrapper: %w", err)
	}
	return nil
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// pyLiteral formats v as a Python literal. JSON string syntax is a subset of
// Python's, so strings go through encoding/json.
func pyLiteral(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "None", nil
	case *string:
		if v == nil {
			return "None", nil
		}
		return pyLiteral(*v)
	case string:
		b, err := json.Marshal(v)
		return string(b), err
	case bool:
		if v {
			return "True", nil
		}
		return "False", nil
	case int:
		return strconv.Itoa(v), nil
	case float64:
		s := strconv.FormatFloat(v, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		return s, nil
	case []int:
		if v == nil {
			return "None", nil // all
		}
		if len(v) == 0 {
			return "[]", nil // none
		}
		parts := make([]string, len(v))
		for i, id := range v {
			parts[i] = strconv.Itoa(id)
		}
		return "[" + strings.Join(parts, ", ") + "]", nil
	}
	return "", fmt.Errorf("no Python literal for %T", v)
}

// BakedLeaseFile reads the lease baked into the settings header of a
// wrapper written by WriteFile; false if the file has none (an older
// wrapper's workers use DefaultLease) or cannot be read.
func BakedLeaseFile(path string) (time.Duration, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	return BakedLease(io.LimitReader(f, 64<<10))
}

// BakedLease finds the lease in a settings header's _BAKED dict
// (template/header.py.tmpl writes it as `    "lease": 60.0,`).
func BakedLease(r io.Reader) (time.Duration, bool) {
	sc := bufio.NewScanner(r)
	in := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "_BAKED = {":
			in = true
		case in && line == "}":
			return 0, false
		case in:
			v, ok := strings.CutPrefix(strings.TrimSpace(line), `"lease": `)
			if !ok {
				continue
			}
			secs, err := strconv.ParseFloat(strings.TrimSuffix(v, ","), 64)
			if err != nil || secs < 0 || secs > MaxLease.Seconds() {
				return 0, false
			}
			return time.Duration(secs * float64(time.Second)), true
		}
	}
	return 0, false
}
