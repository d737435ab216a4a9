package dapwire

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	godap "github.com/google/go-dap"
)

// referenceDecode is what decodeObject must agree with: encoding/json's
// Decoder with UseNumber, into a map, with nothing but white space after
// the object.
func referenceDecode(b []byte) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, false
	}
	if len(bytes.Trim(b[dec.InputOffset():], " \t\r\n")) != 0 {
		return nil, false
	}
	return m, true
}

var decodeObjectCases = []struct {
	name, in string
	ok       bool
}{
	{"DAP response", `{"seq":3,"type":"response","request_seq":2,"success":true,"command":"stackTrace","body":{"stackFrames":[{"id":1,"name":"f","line":3,"column":1,"source":{"path":"/x.py"}}],"totalFrames":1}}`, true},
	{"white space", " \t\r\n{ \"a\" : [ 1 , 2 ] , \"b\" : { } , \"c\" : [ ] }\n ", true},
	{"numbers kept as text", `{"a":-0,"b":1.50,"c":1e+10,"d":-2.5E-3,"e":12345678901234567890123}`, true},
	{"literals", `{"t":true,"f":false,"n":null}`, true},
	{"duplicate key: the last wins", `{"a":1,"a":2}`, true},
	{"escapes", `{"s":"a\"b\\c\/d\b\f\n\r\t\u00e9\u2028\ud83d\ude00"}`, true},
	{"lone surrogate", `{"s":"\ud800x\udc00"}`, true},
	{"invalid UTF-8", "{\"s\":\"a\xffb\xed\xa0\x80c\"}", true},
	{"raw UTF-8", `{"s":"héllo 世界 😀"}`, true},
	{"leading zero", `{"a":01}`, false},
	{"bare minus", `{"a":-}`, false},
	{"dot without digits", `{"a":1.}`, false},
	{"exponent without digits", `{"a":1e}`, false},
	{"plus sign", `{"a":+1}`, false},
	{"control character in string", "{\"a\":\"x\ny\"}", false},
	{"bad escape", `{"a":"\x"}`, false},
	{"short unicode escape", `{"a":"\u12"}`, false},
	{"trailing comma", `{"a":1,}`, false},
	{"trailing comma in array", `{"a":[1,]}`, false},
	{"missing colon", `{"a" 1}`, false},
	{"unquoted key", `{a:1}`, false},
	{"bad literal", `{"a":tru}`, false},
	{"literal with more", `{"a":truex}`, false},
	{"unterminated", `{"a":"b`, false},
	{"stray close after", `{"a":1}}`, false},
	{"second object", `{"a":1} {}`, false},
	{"array at top", `[1]`, false},
	{"null at top", `null`, false},
	{"empty", ``, false},
	{"single quotes", `{'a':1}`, false},
}

// TestDecodeObject: decodeObject agrees with encoding/json on what
// it accepts and what it makes.
func TestDecodeObject(t *testing.T) {
	for _, tc := range decodeObjectCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeObject([]byte(tc.in))
			want, wantOK := referenceDecode([]byte(tc.in))
			if wantOK != tc.ok {
				t.Fatalf("the case is wrong: encoding/json says ok=%v", wantOK)
			}
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if tc.ok && !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded %#v, encoding/json %#v", got, want)
			}
		})
	}
}

// TestDecodeObjectDepth: nesting past encoding/json's limit is an error,
// not a stack overflow.
func TestDecodeObjectDepth(t *testing.T) {
	deep := `{"a":` + string(bytes.Repeat([]byte("["), 20000)) + string(bytes.Repeat([]byte("]"), 20000)) + `}`
	if _, err := decodeObject([]byte(deep)); err == nil {
		t.Fatal("20,000 levels decoded")
	}
	// jsontext's limit is encoding/json's: 10,000 levels in all.
	for _, arrays := range []int{9999, 10000} {
		in := []byte(`{"a":` + string(bytes.Repeat([]byte("["), arrays)) + string(bytes.Repeat([]byte("]"), arrays)) + `}`)
		_, err := decodeObject(in)
		if _, ok := referenceDecode(in); (err == nil) != ok || ok != (arrays == 9999) {
			t.Errorf("%d levels: err %v, encoding/json ok=%v", arrays+1, err, ok)
		}
	}
}

// FuzzDecodeObject holds decodeObject to encoding/json on any input.
func FuzzDecodeObject(f *testing.F) {
	for _, tc := range decodeObjectCases {
		f.Add([]byte(tc.in))
	}
	if files, _ := filepath.Glob("testdata/*.json"); len(files) > 0 {
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeObject(b)
		want, ok := referenceDecode(b)
		if (err == nil) != ok {
			t.Fatalf("decodeObject err = %v, encoding/json ok = %v, input %q", err, ok, b)
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %#v, encoding/json %#v, input %q", got, want, b)
		}
	})
}

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
		{"strings that need escaping", []any{"<a&b>", "q\"\\", "\n\t\x00\x1f\x7f", "é世😀", "\u2028\u2029", "", "\ufffd"}},
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
	// Invalid UTF-8 (which a decoded message never holds: decodeObject
	// made it U+FFFD) is written as U+FFFD itself where json.Marshal writes
	// the escape \ufffd; both read back as the same string.
	got, err := appendJSON(nil, map[string]any{"bad\xffutf8": "x\xfe"})
	if want := "{\"bad\ufffdutf8\":\"x\ufffd\"}"; err != nil || string(got) != want {
		t.Errorf("invalid UTF-8: wrote %q (%v), want %q", got, err, want)
	}
	var back map[string]any
	if err := json.Unmarshal(got, &back); err != nil || back["bad\ufffdutf8"] != "x\ufffd" {
		t.Errorf("invalid UTF-8: read back %q (%v)", back, err)
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
