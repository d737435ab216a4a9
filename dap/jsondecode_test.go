package dap

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
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

// TestDecodeObject: the one-pass decoder agrees with encoding/json on what
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
