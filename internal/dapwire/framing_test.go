package dapwire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// TestFrameReaderLimitUntilAdmitted: before the peer is admitted its
// bodies are bounded by the lower limit; from the frame after admission
// on, by the reader's own.
func TestFrameReaderLimitUntilAdmitted(t *testing.T) {
	frame := func(n int) string { return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", n, strings.Repeat(" ", n)) }
	tests := []struct {
		name  string
		in    []string // frames
		admit int      // admitted after reading this many frames; -1 never
		want  int      // frames read before the error
		err   error
	}{
		{"within the lower limit", []string{frame(100), frame(100)}, -1, 2, io.EOF},
		{"over it before admission", []string{frame(100), frame(101)}, -1, 1, ErrMessageTooLarge},
		{"over it after admission", []string{frame(100), frame(1000)}, 1, 2, io.EOF},
		{"over the own limit after admission", []string{frame(100), frame(1001)}, 1, 1, ErrMessageTooLarge},
	}
	// An own limit below the lower one is kept before admission too.
	small := NewFrameReader(strings.NewReader(frame(60)), 50)
	small.LimitUntil(new(atomic.Bool), 100)
	if _, err := small.ReadFrame(); !errors.Is(err, ErrMessageTooLarge) {
		t.Errorf("a 60-byte frame under limits 50 and 100 before admission: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var admitted atomic.Bool
			fr := NewFrameReader(strings.NewReader(strings.Join(tt.in, "")), 1000)
			fr.LimitUntil(&admitted, 100)
			n := 0
			var err error
			for ; ; n++ {
				if n == tt.admit {
					admitted.Store(true)
				}
				if _, err = fr.ReadFrame(); err != nil {
					break
				}
			}
			if n != tt.want || !errors.Is(err, tt.err) {
				t.Fatalf("%d frames, then %v; want %d, then %v", n, err, tt.want, tt.err)
			}
		})
	}
}

// TestFrameReaderGrowsAsBytesArrive: a peer that declares a huge body and
// sends part of it makes the reader hold about twice what it sent, never
// the length it declared; the whole body, once sent, comes out intact.
func TestFrameReaderGrowsAsBytesArrive(t *testing.T) {
	const declared = DefaultMaxMessageBytes
	for _, sent := range []int{0, 1, BodyChunk, BodyChunk + 1, 64 << 10, 1<<20 + 3} {
		t.Run(fmt.Sprint(sent), func(t *testing.T) {
			pr, pw := io.Pipe()
			fr := NewFrameReader(pr, 0)
			var mu sync.Mutex
			largest := 0
			fr.OnAlloc(func(c int) { mu.Lock(); largest = max(largest, c); mu.Unlock() })
			body := bytes.Repeat([]byte("0123456789abcdef"), declared/16)
			done := make(chan error, 1)
			go func() {
				b, err := fr.ReadFrame()
				if err == nil && !bytes.Equal(b, body) {
					err = errors.New("the body came out changed")
				}
				done <- err
			}()
			// A pipe's Write returns once the reader took every byte.
			if _, err := pw.Write([]byte(fmt.Sprintf("Content-Length: %d\r\n\r\n", declared))); err != nil {
				t.Fatal(err)
			}
			if _, err := pw.Write(body[:sent]); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			held := largest
			mu.Unlock()
			if held > max(BodyChunk, 2*sent) {
				t.Errorf("%d bytes into a %d-byte body the reader holds a %d-byte buffer, want at most %d",
					sent, declared, held, max(BodyChunk, 2*sent))
			}
			if _, err := pw.Write(body[sent:]); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
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

// TestAppendFrame: the header announces the length of all the parts,
// and the reader gets them back as one body.
func TestAppendFrame(t *testing.T) {
	tests := []struct {
		name  string
		dst   string
		parts []string
		want  string
	}{
		{"no parts", "", nil, "Content-Length: 0\r\n\r\n"},
		{"one body", "", []string{`{"a":"é"}`}, "Content-Length: 10\r\n\r\n{\"a\":\"é\"}"},
		{"pieces, some empty", "", []string{`{"seq":`, "12", "", `}`}, "Content-Length: 10\r\n\r\n{\"seq\":12}"},
		{"after what dst holds", "Content-Length: 2\r\n\r\n{}", []string{"[1]"},
			"Content-Length: 2\r\n\r\n{}Content-Length: 3\r\n\r\n[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var parts [][]byte
			for _, p := range tt.parts {
				parts = append(parts, []byte(p))
			}
			got := AppendFrame([]byte(tt.dst), parts...)
			if string(got) != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			fr := NewFrameReader(bytes.NewReader(got[len(tt.dst):]), 0)
			body, err := fr.ReadFrame()
			if err != nil || string(body) != strings.Join(tt.parts, "") {
				t.Fatalf("read back %q (%v)", body, err)
			}
		})
	}
}

// TestReadFrameInto: a body that fits the buffer given is read into it,
// a larger one into a buffer of its own; either way it is the body sent.
func TestReadFrameInto(t *testing.T) {
	bodies := []string{"{}", "", strings.Repeat("x", 16), strings.Repeat("y", 17), "[1]"}
	var in []byte
	for _, b := range bodies {
		in = AppendFrame(in, []byte(b))
	}
	fr := NewFrameReader(bytes.NewReader(in), 0)
	buf := make([]byte, 16)
	for _, want := range bodies {
		got, err := fr.ReadFrameInto(buf)
		if err != nil || string(got) != want {
			t.Fatalf("read %q (%v), want %q", got, err, want)
		}
		if reused := len(got) > 0 && &got[0] == &buf[0]; reused != (len(want) <= len(buf) && len(want) > 0) {
			t.Errorf("%d-byte body into a %d-byte buffer: read into it %v", len(want), len(buf), reused)
		}
		if got == nil {
			t.Errorf("%d-byte body read as nil", len(want))
		}
	}
	if _, err := fr.ReadFrameInto(buf); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

// FuzzFrameReader feeds arbitrary bytes to the reader and decoder: they may
// fail, but must not panic, hang, or allocate past the limit or far past
// the input.
func FuzzFrameReader(f *testing.F) {
	f.Add([]byte("Content-Length: 2\r\n\r\n{}"))
	f.Add([]byte("Content-Length: 47\r\n\r\n{\"seq\":1,\"type\":\"request\",\"command\":\"threads\"}"))
	f.Add([]byte("Content-Length: 99999999999999999999\r\n\r\n"))
	f.Add([]byte("Content-Length: 5\r\n\r\n{nope"))
	f.Add([]byte("Content-Length: 60000\r\n\r\n{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzFrames(t, data, 0)
	})
}

// FuzzFrameReaderUntilAdmitted is FuzzFrameReader with a lower limit until
// the peer is admitted, after admitAfter frames.
func FuzzFrameReaderUntilAdmitted(f *testing.F) {
	f.Add([]byte("Content-Length: 2\r\n\r\n{}Content-Length: 5000\r\n\r\n"), uint8(1))
	f.Add([]byte("Content-Length: 2\r\n\r\n{}Content-Length: 5000\r\n\r\n"), uint8(2))
	f.Add([]byte("Content-Length: 5000\r\n\r\n{}"), uint8(255))
	f.Fuzz(func(t *testing.T, data []byte, admitAfter uint8) {
		fuzzFrames(t, data, int(admitAfter)+1)
	})
}

// fuzzFrames reads frames from data, under a limit of 64 KiB, and of
// 1 KiB until frame admitAt-1 was read if admitAt > 0.
func fuzzFrames(t *testing.T, data []byte, admitAt int) {
	const limit, preLimit = 1 << 16, 1 << 10
	var admitted atomic.Bool
	fr := NewFrameReader(bytes.NewReader(data), limit)
	if admitAt > 0 {
		fr.LimitUntil(&admitted, preLimit)
	}
	held := 0
	fr.OnAlloc(func(c int) { held = c })
	for i := 1; i <= 100; i++ {
		if i == admitAt {
			admitted.Store(true)
		}
		now := limit
		if admitAt > 0 && !admitted.Load() {
			now = preLimit
		}
		b, err := fr.ReadFrame()
		if held > now || held > max(2*len(data), BodyChunk) {
			t.Fatalf("a %d-byte buffer under a %d-byte limit from %d bytes of input", held, now, len(data))
		}
		if err != nil {
			return
		}
		if len(b) > now {
			t.Fatalf("frame of %d bytes passed a %d limit", len(b), now)
		}
		_, _ = DecodeMessage(b)
	}
}

// TestReadFromNextKeepsBufferedFrames: a reader told to read from another
// source switches only once nothing it read ahead is left, so no frame is
// lost or reordered.
func TestReadFromNextKeepsBufferedFrames(t *testing.T) {
	first := AppendFrame(AppendFrame(nil, []byte(`{"n":1}`)), []byte(`{"n":2}`))
	fr := NewFrameReader(bytes.NewReader(first), 0)
	next := bytes.NewReader(AppendFrame(nil, []byte(`{"n":3}`)))
	var got []string
	for i := range 3 {
		if err := fr.Wait(); err != nil {
			t.Fatalf("frame %d: Wait: %v", i+1, err)
		}
		body, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("frame %d: %v", i+1, err)
		}
		got = append(got, string(body))
		if i == 0 {
			fr.ReadFromNext(next) // frame 2 is buffered already
		}
	}
	if want := []string{`{"n":1}`, `{"n":2}`, `{"n":3}`}; !slices.Equal(got, want) {
		t.Fatalf("read %q, want %q", got, want)
	}
	if err := fr.Wait(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}
