package tunnel

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"
)

func header(addr string) []byte {
	return append([]byte{streamHeaderVersion, byte(len(addr))}, addr...)
}

func TestStreamHeaderRoundTrip(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"10.1.2.3:5678", "10.1.2.3:5678"},
		{"[2001:db8::1]:1", "[2001:db8::1]:1"},
		{"[::ffff:10.0.0.1]:9", "10.0.0.1:9"}, // mapped: written as IPv4
		{"[fe80::1%eth0]:65535", "[fe80::1%eth0]:65535"},
	} {
		b, err := appendStreamHeader([]byte("x"), netip.MustParseAddrPort(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		got, n, err := parseStreamHeader(b[1:])
		if err != nil || n != len(b)-1 || got.String() != tc.want {
			t.Errorf("%s: parsed %v, %d, %v; want %s, %d", tc.in, got, n, err, tc.want, len(b)-1)
		}
	}
	if _, err := appendStreamHeader(nil, netip.AddrPort{}); !errors.Is(err, ErrStreamHeader) {
		t.Errorf("no address: %v", err)
	}
}

func TestParseStreamHeaderStrict(t *testing.T) {
	long := "[fe80::1%" + strings.Repeat("x", 60) + "]:1"
	for _, tc := range []struct {
		name string
		in   []byte
		err  string // "" = truncated
	}{
		{"empty", nil, ""},
		{"version only", []byte{streamHeaderVersion}, ""},
		{"short address", header("10.0.0.1:5")[:5], ""},
		{"other version", append([]byte{2}, header("10.0.0.1:5")[1:]...), "version 2"},
		{"zero length", []byte{streamHeaderVersion, 0}, "length 0"},
		{"too long", []byte{streamHeaderVersion, maxSourceAddrLen + 1}, "length 65"},
		{"long zone", header(long), "length"},
		{"no port", header("10.0.0.1"), "address"},
		{"port 0", header("10.0.0.1:0"), "canonical"},
		{"leading zeros", header("10.0.0.01:5"), "address"},
		{"padded port", header("10.0.0.1:05"), "canonical"},
		{"mapped", header("[::ffff:10.0.0.1]:5"), "canonical"},
		{"uncompressed v6", header("[2001:db8:0:0:0:0:0:1]:5"), "canonical"},
		{"host name", header("gateway:5"), "address"},
		{"trailing space", header("10.0.0.1:5 "), "address"},
	} {
		_, _, err := parseStreamHeader(tc.in)
		switch {
		case tc.err == "" && err != errShortHeader:
			t.Errorf("%s: %v, want truncated", tc.name, err)
		case tc.err != "" && (err == nil || err == errShortHeader || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.err)
		case err != nil && !errors.Is(err, ErrStreamHeader):
			t.Errorf("%s: %v does not wrap ErrStreamHeader", tc.name, err)
		}
	}
}

// TestReadStreamHeaderReadsNoMore: what follows the header is left for
// the proxy as the executor's.
func TestReadStreamHeaderReadsNoMore(t *testing.T) {
	r := bytes.NewReader(append(header("10.0.0.7:4321"), "Content-Length: 2\r\n"...))
	src, err := readStreamHeader(r)
	if err != nil || src.String() != "10.0.0.7:4321" {
		t.Fatalf("got %v, %v", src, err)
	}
	rest, _ := io.ReadAll(r)
	if string(rest) != "Content-Length: 2\r\n" {
		t.Fatalf("left %q", rest)
	}
	for _, in := range [][]byte{nil, header("10.0.0.7:4321")[:6], {9, 9}} {
		if _, err := readStreamHeader(bytes.NewReader(in)); !errors.Is(err, ErrStreamHeader) {
			t.Errorf("%q: %v, want ErrStreamHeader", in, err)
		}
	}
}

// FuzzStreamHeader: any bytes from the agent's side are parsed without a
// panic, within the bound, and a header accepted is exactly what the agent
// writes for its address.
func FuzzStreamHeader(f *testing.F) {
	f.Add(header("10.1.2.3:5678"))
	f.Add(header("[2001:db8::1]:1"))
	f.Add(header("[fe80::1%eth0]:2"))
	f.Add([]byte{streamHeaderVersion, 0})
	f.Add([]byte{7, 3, 'a', 'b', 'c'})
	f.Fuzz(func(t *testing.T, b []byte) {
		src, n, err := parseStreamHeader(b)
		if err != nil {
			if !errors.Is(err, ErrStreamHeader) {
				t.Fatalf("%v does not wrap ErrStreamHeader", err)
			}
			return
		}
		if n > 2+maxSourceAddrLen || n > len(b) {
			t.Fatalf("header of %d bytes", n)
		}
		again, err := appendStreamHeader(nil, src)
		if err != nil || !bytes.Equal(again, b[:n]) {
			t.Fatalf("accepted %q as %v, which is written %q (%v)", b[:n], src, again, err)
		}
		got, err := readStreamHeader(bytes.NewReader(b))
		if err != nil || got != src {
			t.Fatalf("readStreamHeader %v, %v; parseStreamHeader %v", got, err, src)
		}
	})
}
