package workerwrap

import (
	"encoding/json"
	"errors"
	"flag"
	"math"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// settingsCase is one row of testdata/settings_cases.json, the table the
// worker module's parsers are tested against too
// (python/tests/test_settings_cases.py).
type settingsCase struct {
	Setting string          `json:"setting"`
	In      string          `json:"in"`
	Want    json.RawMessage `json:"want"`
	Error   bool            `json:"error"`
	Go      *caseOutcome    `json:"go"`
	Python  *caseOutcome    `json:"python"`
	Why     string          `json:"why"`
}

type caseOutcome struct {
	Want  json.RawMessage `json:"want"`
	Error bool            `json:"error"`
}

func loadSettingsCases(t *testing.T) []settingsCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "settings_cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Cases []settingsCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &table); err != nil {
		t.Fatalf("settings_cases.json: %v", err)
	}
	if len(table.Cases) == 0 {
		t.Fatal("settings_cases.json has no cases")
	}
	return table.Cases
}

// parseSetting parses in as the Go side does for setting: the way the flags
// of wrap, conf and submit read it, then Options.Validate.
func parseSetting(setting, in string) (any, error) {
	o := NewOptions()
	switch setting {
	case "ids":
		ids, err := ParseIDs(in)
		if err != nil {
			return nil, err
		}
		o.Partitions = ids
		if err := o.Validate(); err != nil {
			return nil, err
		}
		return ids, nil
	case "proxy":
		o.Proxy = in
		if err := o.Validate(); err != nil {
			return nil, err
		}
		host, port, _ := net.SplitHostPort(in)
		n, _ := strconv.Atoi(port)
		return []any{host, n}, nil
	case "sample_rate":
		var v float64
		fs := flag.NewFlagSet("", flag.ContinueOnError)
		fs.Float64Var(&v, "sample-rate", 1, "")
		fs.SetOutput(discard{})
		if err := fs.Set("sample-rate", in); err != nil {
			return nil, err
		}
		o.SampleRate = v
		if err := o.Validate(); err != nil {
			return nil, err
		}
		return v, nil
	case "timeout":
		var d time.Duration
		fs := flag.NewFlagSet("", flag.ContinueOnError)
		fs.DurationVar(&d, "connect-timeout", time.Second, "")
		if err := fs.Set("connect-timeout", in); err != nil {
			return nil, err
		}
		o.ConnectTimeout = d
		if err := o.Validate(); err != nil {
			return nil, err
		}
		return d.Seconds(), nil
	case "lease":
		var d time.Duration
		fs := flag.NewFlagSet("", flag.ContinueOnError)
		fs.DurationVar(&d, "lease", DefaultLease, "")
		if err := fs.Set("lease", in); err != nil {
			return nil, err
		}
		o.Lease = d
		if err := o.Validate(); err != nil {
			return nil, err
		}
		return d.Seconds(), nil
	case "proxy_backoff":
		var d time.Duration
		fs := flag.NewFlagSet("", flag.ContinueOnError)
		fs.DurationVar(&d, "proxy-backoff", DefaultProxyBackoff, "")
		if err := fs.Set("proxy-backoff", in); err != nil {
			return nil, err
		}
		o.ProxyBackoff = d
		if err := o.Validate(); err != nil {
			return nil, err
		}
		return d.Seconds(), nil
	case "bool":
		var v bool
		fs := flag.NewFlagSet("", flag.ContinueOnError)
		fs.BoolVar(&v, "wait", false, "")
		if err := fs.Set("wait", in); err != nil {
			return nil, err
		}
		return v, nil
	}
	return nil, errUnknownSetting
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

var errUnknownSetting = errors.New("unknown setting")

func TestSettingsCasesGo(t *testing.T) {
	for _, tc := range loadSettingsCases(t) {
		want, wantErr := tc.Want, tc.Error
		if tc.Go != nil || tc.Python != nil {
			if tc.Why == "" {
				t.Errorf("%s %q: the sides differ but why is empty", tc.Setting, tc.In)
			}
		}
		if tc.Go != nil {
			want, wantErr = tc.Go.Want, tc.Go.Error
		}
		got, err := parseSetting(tc.Setting, tc.In)
		if errors.Is(err, errUnknownSetting) {
			t.Errorf("unknown setting %q", tc.Setting)
			continue
		}
		if wantErr {
			if err == nil {
				t.Errorf("%s %q = %v, want an error", tc.Setting, tc.In, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %q: %v, want %s", tc.Setting, tc.In, err, want)
			continue
		}
		if !sameJSON(t, got, want) {
			t.Errorf("%s %q = %v, want %s", tc.Setting, tc.In, got, want)
		}
	}
}

// sameJSON compares got with want by their JSON values; numbers within a
// relative 1e-9, since 1500ms is 1.5 s on one side and 1500*0.001 on the other.
func sameJSON(t *testing.T, got any, want json.RawMessage) bool {
	t.Helper()
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want %s: %v", want, err)
	}
	return closeEnough(g, w)
}

func closeEnough(g, w any) bool {
	switch w := w.(type) {
	case float64:
		g, ok := g.(float64)
		return ok && math.Abs(g-w) <= 1e-9*math.Max(1, math.Abs(w))
	case []any:
		g, ok := g.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !closeEnough(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(g, w)
}
