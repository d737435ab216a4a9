package jsonc

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestStandardize(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		want     any // what encoding/json decodes from the result
		comments int
		commas   int
	}{
		{name: "plain JSON", in: `{"a": [1, 2], "b": {"c": null}}`,
			want: map[string]any{"a": []any{1.0, 2.0}, "b": map[string]any{"c": nil}}},
		{name: "line comment", in: "{\n  // a comment\n  \"a\": 1 // after\n}",
			want: map[string]any{"a": 1.0}, comments: 2},
		{name: "block comment", in: "{/* one */\"a\": /* two\nlines */ 1}",
			want: map[string]any{"a": 1.0}, comments: 2},
		{name: "comment at end without newline", in: `{"a": 1} // bye`,
			want: map[string]any{"a": 1.0}, comments: 1},
		{name: "trailing comma in object", in: `{"a": 1,}`,
			want: map[string]any{"a": 1.0}, commas: 1},
		{name: "trailing comma in array", in: `[1, 2, ]`, want: []any{1.0, 2.0}, commas: 1},
		{name: "trailing commas nested", in: "{\"a\": [{\"b\": 1,},],\n}",
			want: map[string]any{"a": []any{map[string]any{"b": 1.0}}}, commas: 3},
		{name: "trailing comma before a comment", in: "[1, // last\n]",
			want: []any{1.0}, comments: 1, commas: 1},
		{name: "trailing comma before a block comment", in: "{\"a\": 1, /* x */ }",
			want: map[string]any{"a": 1.0}, comments: 1, commas: 1},
		{name: "slashes inside strings", in: `{"url": "http://x/*y*/", "p": "a//b"}`,
			want: map[string]any{"url": "http://x/*y*/", "p": "a//b"}},
		{name: "escaped quote in string", in: `{"s": "say \"hi\" // not a comment", "t": "\\"}`,
			want: map[string]any{"s": `say "hi" // not a comment`, "t": `\`}},
		{name: "comma inside string before brace", in: `{"s": ",}"}`,
			want: map[string]any{"s": ",}"}},
		{name: "CRLF line comment", in: "{\r\n// c\r\n\"a\": 1\r\n}",
			want: map[string]any{"a": 1.0}, comments: 1},
		{name: "byte order mark", in: "\ufeff{\"a\": 1}", want: map[string]any{"a": 1.0}},
		{name: "empty containers keep their commas alone", in: `{"a": [], "b": {}}`,
			want: map[string]any{"a": []any{}, "b": map[string]any{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, info, err := Standardize([]byte(tt.in))
			if err != nil {
				t.Fatalf("Standardize: %v", err)
			}
			if len(out) != len(tt.in) {
				t.Errorf("length changed: %d → %d (offsets must stay put)", len(tt.in), len(out))
			}
			if strings.Count(string(out), "\n") != strings.Count(tt.in, "\n") {
				t.Errorf("line breaks changed:\n%q\n→\n%q", tt.in, out)
			}
			var got any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("result is not JSON: %v\n%q", err, out)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
			if info.Comments != tt.comments || info.TrailingCommas != tt.commas {
				t.Errorf("info %+v, want %d comments, %d trailing commas", info, tt.comments, tt.commas)
			}
		})
	}
}

func TestStandardizeLeavesInvalidJSONInvalid(t *testing.T) {
	for _, in := range []string{`{"a": 1,, }`, `[,]`, `{,}`, `{"a":,}`, `{"a" 1}`, `{"a": 1} x`, `/`} {
		out, _, err := Standardize([]byte(in))
		if err != nil {
			continue // also fine: reported here
		}
		var v any
		if json.Unmarshal(out, &v) == nil {
			t.Errorf("%q became valid JSON %q", in, out)
		}
	}
}

func TestStandardizeErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"{\n  \"a\": /* never closed\n}", "line 2, column 8: unterminated /* comment"},
		{"{\"a\": \"open", "line 1, column 7: unterminated string"},
		{"{\n\"a\": \"line\nbreak\"}", "line 2, column 6: string not closed"},
	}
	for _, tt := range tests {
		_, _, err := Standardize([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Standardize(%q) = %v, want an error containing %q", tt.in, err, tt.want)
		}
	}
}

func TestStandardizeDoesNotModifyInput(t *testing.T) {
	in := []byte("{// c\n\"a\": 1,}")
	orig := string(in)
	if _, _, err := Standardize(in); err != nil {
		t.Fatal(err)
	}
	if string(in) != orig {
		t.Errorf("input modified: %q", in)
	}
}

func TestPosition(t *testing.T) {
	src := []byte("ab\ncd\n")
	for _, tt := range []struct{ off, line, col int }{{0, 1, 1}, {1, 1, 2}, {3, 2, 1}, {4, 2, 2}, {99, 3, 1}} {
		if l, c := Position(src, tt.off); l != tt.line || c != tt.col {
			t.Errorf("Position(%d) = %d:%d, want %d:%d", tt.off, l, c, tt.line, tt.col)
		}
	}
}

func FuzzStandardize(f *testing.F) {
	for _, s := range []string{`{"a": 1,}`, "// c\n[1,]", `"/*"`, `{"s": "\\\"//"}`, "/* x */"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, _, err := Standardize(in)
		if err != nil {
			return
		}
		if len(out) != len(in) {
			t.Fatalf("length changed: %d → %d", len(in), len(out))
		}
		// Valid JSON without comments or trailing commas passes unchanged.
		if json.Valid(in) && !strings.Contains(string(in), "\ufeff") && string(out) != string(in) {
			var a, b any
			if json.Unmarshal(in, &a) != nil || json.Unmarshal(out, &b) != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("valid JSON changed meaning: %q → %q", in, out)
			}
		}
	})
}
