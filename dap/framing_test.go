package dap

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestFrameReader(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		max     int
		want    []string
		wantErr string
	}{
		{"one message", "Content-Length: 2\r\n\r\n{}", 0, []string{"{}"}, ""},
		{"two back to back", "Content-Length: 2\r\n\r\n{}Content-Length: 3\r\n\r\n[1]", 0, []string{"{}", "[1]"}, ""},
		{"header case and extra headers", "content-length:2\r\nContent-Type: x\r\n\r\n{}", 0, []string{"{}"}, ""},
		{"bare LF line ends", "Content-Length: 2\n\n{}", 0, []string{"{}"}, ""},
		{"clean EOF", "", 0, nil, ""},
		{"missing length", "Content-Type: x\r\n\r\n{}", 0, nil, "missing Content-Length"},
		{"negative length", "Content-Length: -1\r\n\r\n", 0, nil, "bad Content-Length"},
		{"non-numeric length", "Content-Length: lots\r\n\r\n", 0, nil, "bad Content-Length"},
		{"header without colon", "garbage\r\n\r\n", 0, nil, "malformed header"},
		{"over the limit", "Content-Length: 11\r\n\r\n", 10, nil, "exceeds the size limit"},
		{"body shorter than announced", "Content-Length: 10\r\n\r\n{}", 0, nil, "unexpected EOF"},
		{"EOF inside header", "Content-Len", 0, nil, "unexpected EOF"},
		{"endless header", "X: " + strings.Repeat("a", 5000) + "\r\n\r\n", 0, nil, "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fr := NewFrameReader(strings.NewReader(tt.in), tt.max)
			var got []string
			for {
				b, err := fr.ReadFrame()
				if err == io.EOF {
					break
				}
				if err != nil {
					if tt.wantErr == "" || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("err = %v, want %q", err, tt.wantErr)
					}
					return
				}
				got = append(got, string(b))
			}
			if tt.wantErr != "" {
				t.Fatalf("no error, want %q", tt.wantErr)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestOversizedErrorIsTyped(t *testing.T) {
	_, err := NewFrameReader(strings.NewReader("Content-Length: 100000000\r\n\r\n"), 1<<20).ReadFrame()
	if !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("err = %v, want ErrMessageTooLarge", err)
	}
}

func TestDecodeMessage(t *testing.T) {
	tests := []struct {
		name, in, wantErr string
	}{
		{"request", `{"seq":1,"type":"request","command":"threads"}`, ""},
		{"response", `{"seq":1,"type":"response","command":"threads","request_seq":3,"success":true}`, ""},
		{"event", `{"seq":1,"type":"event","event":"stopped"}`, ""},
		{"not JSON", `{`, "invalid JSON"},
		{"array", `[]`, "invalid JSON"},
		{"null", `null`, "not a JSON object"},
		{"unknown type", `{"type":"nope"}`, "unknown message type"},
		{"request without command", `{"type":"request"}`, "without \"command\""},
		{"response without request_seq", `{"type":"response","command":"x"}`, "request_seq"},
		{"event without name", `{"type":"event"}`, "without \"event\""},
		{"trailing data", `{"type":"event","event":"x"} {}`, "trailing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeMessage([]byte(tt.in))
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestFramesRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	m := Message{"type": "event", "event": "output", "body": map[string]any{"output": "héllo\r\n"}}
	body, _ := m.Encode()
	buf.Write(frameWithSeq(body, 7))
	got, err := NewFrameReader(&buf, 0).ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	dm, err := DecodeMessage(got)
	if err != nil {
		t.Fatal(err)
	}
	if dm.Seq() != 7 || dm.Body()["output"] != "héllo\r\n" {
		t.Fatalf("round trip changed the message: %s", got)
	}
	if got := string(frameWithSeq([]byte("{}"), 12)); got != "Content-Length: 10\r\n\r\n{\"seq\":12}" {
		t.Fatalf("empty object framed as %q", got)
	}
}

// FuzzFrameReader feeds arbitrary bytes to the reader and decoder: they may
// fail, but must not panic, hang, or allocate past the limit.
func FuzzFrameReader(f *testing.F) {
	f.Add([]byte("Content-Length: 2\r\n\r\n{}"))
	f.Add([]byte("Content-Length: 47\r\n\r\n{\"seq\":1,\"type\":\"request\",\"command\":\"threads\"}"))
	f.Add([]byte("Content-Length: 99999999999999999999\r\n\r\n"))
	f.Add([]byte("Content-Length: 5\r\n\r\n{nope"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := NewFrameReader(bytes.NewReader(data), 1<<16)
		for range 100 {
			b, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if len(b) > 1<<16 {
				t.Fatalf("frame of %d bytes passed a %d limit", len(b), 1<<16)
			}
			_, _ = DecodeMessage(b)
		}
	})
}
