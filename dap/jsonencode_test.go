package dap

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	godap "github.com/google/go-dap"
)

// TestAppendJSON: appendJSON writes what json.Marshal writes, and fails
// where it fails.
func TestAppendJSON(t *testing.T) {
	var nilMap map[string]any
	var nilSlice []any
	for _, tc := range []struct {
		name string
		v    any
	}{
		{"message", Message{"type": "response", "seq": json.Number("3"), "body": map[string]any{"b": []any{1, "x", nil, true}, "a": map[string]any{}}}},
		{"nil map and slice", map[string]any{"m": nilMap, "s": nilSlice, "e": []any{}}},
		{"nil message", Message(nil)},
		{"strings that need escaping", []any{"<a&b>", "q\"\\", "\n\t\x00\x1f\x7f", "é世😀", "\u2028\u2029", "bad\xffutf8", ""}},
		{"keys that need escaping", map[string]any{"<k>": 1, "é": 2, "\x01": 3, "a b": 4}},
		{"numbers", []any{json.Number("-1.5e3"), json.Number(""), int64(-7), uint64(1 << 63), int32(-3), uint32(4), 2.5, 1e21, float64(1) / 3}},
		{"go-dap struct", godap.StackFrame{Id: 1, Name: "f", Line: 2}},
		{"map of strings", map[string]string{"b": "1", "a": "<"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := appendJSON([]byte("prefix"), tc.v)
			want, wantErr := json.Marshal(tc.v)
			if err != nil || wantErr != nil {
				t.Fatalf("err %v, json.Marshal's %v", err, wantErr)
			}
			if string(got) != "prefix"+string(want) {
				t.Fatalf("wrote %s\njson.Marshal %s", got[len("prefix"):], want)
			}
		})
	}
	for _, bad := range []any{json.Number("01"), json.Number("x"), math.NaN(), map[string]any{"c": make(chan int)}} {
		if _, err := appendJSON(nil, []any{bad}); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// FuzzAppendJSON: any message the proxy decodes is encoded as json.Marshal
// would encode it.
func FuzzAppendJSON(f *testing.F) {
	for _, tc := range decodeObjectCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeObject(b)
		if err != nil {
			return
		}
		got, err := appendJSON(nil, m)
		want, wantErr := json.Marshal(m)
		if (err == nil) != (wantErr == nil) || string(got) != string(want) {
			t.Fatalf("wrote %q (%v)\njson.Marshal %q (%v)", got, err, want, wantErr)
		}
	})
}

// BenchmarkCodec decodes and re-encodes a pydevd stackTrace answer of 14
// frames, as the proxy does for each one it relays, against encoding/json
// doing the same (Decoder with UseNumber, then Marshal).
func BenchmarkCodec(b *testing.B) {
	var frames []any
	for i := range 14 {
		frames = append(frames, map[string]any{"id": i + 1, "name": "monthly_payment", "line": 12 + i, "column": 1,
			"source": map[string]any{"path": "/tmp/vscode-check/repo/examples/loans/loanlib.py", "sourceReference": 0}})
	}
	msg, err := json.Marshal(map[string]any{"seq": 12, "type": "response", "request_seq": 10, "success": true,
		"command": "stackTrace", "body": map[string]any{"stackFrames": frames, "totalFrames": 14}})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			dec := json.NewDecoder(bytes.NewReader(msg))
			dec.UseNumber()
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("proxy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m, err := DecodeMessage(msg)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := m.Encode(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
