package workerwrap

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(*Options)
		wantErr []string // substrings; nil means valid
	}{
		{"defaults", func(*Options) {}, nil},
		{"ipv6 proxy", func(o *Options) { o.Proxy = "[::1]:5678" }, nil},
		{"hostname proxy", func(o *Options) { o.Proxy = "driver.example:80" }, nil},
		{"filters", func(o *Options) { o.Partitions = []int{0, 7}; o.Stages = []int{3}; o.SampleRate = 0.5 }, nil},
		{"proxy without port", func(o *Options) { o.Proxy = "localhost" }, []string{`proxy "localhost": want host:port`}},
		{"proxy empty host", func(o *Options) { o.Proxy = ":5678" }, []string{"host is empty"}},
		{"proxy port zero", func(o *Options) { o.Proxy = "h:0" }, []string{"port must be a number in 1..65535"}},
		{"proxy port text", func(o *Options) { o.Proxy = "h:http" }, []string{"port must be a number"}},
		{"token env", func(o *Options) { o.TokenEnv = "1BAD-NAME" }, []string{`token env "1BAD-NAME"`}},
		{"token newline", func(o *Options) { o.Token = "a\nb" }, []string{"token: must not contain"}},
		{"negative partition", func(o *Options) { o.Partitions = []int{1, -2} }, []string{"partitions: -2 is negative"}},
		{"negative stage", func(o *Options) { o.Stages = []int{-1} }, []string{"stages: -1 is negative"}},
		{"sample zero", func(o *Options) { o.SampleRate = 0 }, []string{"sample rate 0"}},
		{"sample above one", func(o *Options) { o.SampleRate = 1.5 }, []string{"sample rate 1.5"}},
		{"sample NaN", func(o *Options) { o.SampleRate = math.NaN() }, []string{"sample rate NaN"}},
		{"connect timeout zero", func(o *Options) { o.ConnectTimeout = 0 }, []string{"connect timeout 0s"}},
		{"handshake timeout huge", func(o *Options) { o.HandshakeTimeout = time.Hour }, []string{"handshake timeout 1h0m0s"}},
		{"several at once", func(o *Options) { o.Proxy = "x"; o.SampleRate = 2 }, []string{"proxy", "sample rate"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			tc.mod(&o)
			err := o.Validate()
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors containing %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate() = %q, want it to contain %q", err, want)
				}
			}
		})
	}
}

func TestParseIDs(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr string
	}{
		{"", nil, ""},
		{"all", nil, ""},
		{"*", nil, ""},
		{"none", []int{}, ""},
		{"3", []int{3}, ""},
		{" 0, 7 ,", []int{0, 7}, ""},
		{"1,x", nil, `"x" is not an id`},
		{"-1", nil, "-1 is negative"},
	}
	for _, tc := range tests {
		got, err := ParseIDs(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseIDs(%q) error = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseIDs(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}
