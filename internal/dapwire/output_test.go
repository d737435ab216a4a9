package dapwire

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// pydevdOutput is an output event as debugpy's pydevd writes it
// (NetCommand with is_json: json.dumps of the event, ASCII only).
const pydevdOutput = `{"type": "event", "event": "output", "body": {"output": "h\u00e9llo\n\tworld \"x\" \\n\n", "category": "stdout", "source": {}}, "seq": 2, "pydevd_cmd_id": 116}`

func TestDecodeOutputEvent(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{"pydevd's", pydevdOutput, true},
		{"compact, other order", `{"seq":4,"body":{"category":"stderr","output":"x\n"},"event":"output","type":"event"}`, true},
		{"raw UTF-8", `{"type":"event","event":"output","body":{"output":"世界 😀\n"}}`, true},
		{"empty output", `{"type":"event","event":"output","body":{"output":""}}`, true},
		{"not an output event", `{"type":"event","event":"stopped","body":{"output":"x"}}`, false},
		{"a response", `{"type":"response","event":"output","body":{"output":"x"}}`, false},
		{"a source with a path", `{"type":"event","event":"output","body":{"output":"x","source":{"path":"/a.py"}}}`, false},
		{"a line", `{"type":"event","event":"output","body":{"output":"x","line":3}}`, false},
		{"variablesReference", `{"type":"event","event":"output","body":{"output":"x","variablesReference":7}}`, false},
		{"another top-level key", `{"type":"event","event":"output","body":{"output":"x"},"extra":1}`, false},
		{"no output", `{"type":"event","event":"output","body":{"category":"stdout"}}`, false},
		{"no body", `{"type":"event","event":"output"}`, false},
		{"output not a string", `{"type":"event","event":"output","body":{"output":3}}`, false},
		{"seq not a number", `{"type":"event","event":"output","seq":"2","body":{"output":"x"}}`, false},
		{"duplicate key", `{"type":"event","event":"output","body":{"output":"x","output":"y"}}`, false},
		{"invalid UTF-8", "{\"type\":\"event\",\"event\":\"output\",\"body\":{\"output\":\"a\xffb\"}}", false},
		{"lone surrogate", `{"type":"event","event":"output","body":{"output":"\ud800"}}`, false},
		{"control character", "{\"type\":\"event\",\"event\":\"output\",\"body\":{\"output\":\"a\nb\"}}", false},
		{"trailing data", `{"type":"event","event":"output","body":{"output":"x"}} {}`, false},
		{"unterminated", `{"type":"event","event":"output","body":{"output":"x`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := DecodeOutputEvent([]byte(tc.in))
			if ok != tc.ok {
				t.Fatalf("DecodeOutputEvent(%s) ok = %v, want %v", tc.in, ok, tc.ok)
			}
			if ok {
				sameAsDecodeMessage(t, []byte(tc.in), m)
			}
		})
	}
}

// sameAsDecodeMessage checks that m, DecodeOutputEvent's decoding of in,
// is DecodeMessage's with the output quoted, and that the output's Len
// is its text's.
func sameAsDecodeMessage(t *testing.T, in []byte, m Message) {
	t.Helper()
	want, err := DecodeMessage(in)
	if err != nil {
		t.Fatalf("DecodeOutputEvent took what DecodeMessage refuses (%v): %q", err, in)
	}
	q, isQuoted := m.Body()["output"].(QuotedString)
	if !isQuoted {
		t.Fatalf("output is %T, not a QuotedString", m.Body()["output"])
	}
	text := q.Text()
	if q.Len() != len(text) {
		t.Errorf("Len() = %d, want %d (%q)", q.Len(), len(text), text)
	}
	got := Message{}
	for k, v := range m {
		got[k] = v
	}
	body := map[string]any{}
	for k, v := range m.Body() {
		body[k] = v
	}
	body["output"] = text
	got["body"] = body
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeOutputEvent gave %v, DecodeMessage %v", got, want)
	}
	// Encoded, it says the same as DecodeMessage's encoded.
	enc, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	again, err := DecodeMessage(enc)
	if err != nil {
		t.Fatalf("its encoding %q does not decode: %v", enc, err)
	}
	if !reflect.DeepEqual(again, want) {
		t.Errorf("encoded and decoded again it is %v, want %v", again, want)
	}
}

func FuzzDecodeOutputEvent(f *testing.F) {
	f.Add([]byte(pydevdOutput))
	f.Add([]byte(`{"type":"event","event":"output","body":{"output":"\u000a\\u000a\ud83d\ude00\u2028"}}`))
	f.Add([]byte(`{"type":"event","event":"output","body":{"output":"a","category":"x","source":{}},"seq":1}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		m, ok := DecodeOutputEvent(in)
		if ok {
			sameAsDecodeMessage(t, in, m)
		}
	})
}

// prefixLinesText is PrefixLines on decoded text: the reference.
func prefixLinesText(s, prefix string, midLine bool) (string, bool) {
	if s == "" {
		return s, midLine
	}
	var b strings.Builder
	for i, line := range strings.SplitAfter(s, "\n") {
		if line == "" {
			continue
		}
		if i > 0 || !midLine {
			b.WriteString(prefix)
		}
		b.WriteString(line)
	}
	return b.String(), !strings.HasSuffix(s, "\n")
}

// quoteASCII quotes s as Python's json.dumps does (ensure_ascii): every
// non-ASCII character as \u escapes, and newlines as \n or, if
// longNewlines, \u000a.
func quoteASCII(s string, longNewlines bool) QuotedString {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '\n' && longNewlines:
			b.WriteString(`\u000A`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r > 0x7e:
			if r > 0xffff {
				r -= 0x10000
				fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
				continue
			}
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return QuotedString(b.String())
}

func TestPrefixLines(t *testing.T) {
	for _, tc := range []struct {
		in      string
		midLine bool
	}{
		{"a\nb\n", false}, {"a\nb", false}, {"a\nb", true}, {"\n", false}, {"\n", true},
		{"\n\n", true}, {"no newline", false}, {"no newline", true}, {"", false}, {"", true},
		{`back\slash\n` + "\n", false}, {"é\n世界\n😀", false}, {"quote \" \n", true},
	} {
		check := func(t *testing.T, q QuotedString) {
			got, gotMid := q.PrefixLines("[w · 1] ", tc.midLine)
			want, wantMid := prefixLinesText(tc.in, "[w · 1] ", tc.midLine)
			if got.Text() != want || gotMid != wantMid {
				t.Errorf("PrefixLines(%s, %v) = %s (%q), %v; want %q, %v", q, tc.midLine, got, got.Text(), gotMid, want, wantMid)
			}
			if !json.Valid(got) {
				t.Errorf("PrefixLines(%s) = %s: not JSON", q, got)
			}
		}
		t.Run(fmt.Sprintf("%q,%v", tc.in, tc.midLine), func(t *testing.T) {
			b, _ := json.Marshal(tc.in)
			check(t, QuotedString(b))
			check(t, quoteASCII(tc.in, false))
			check(t, quoteASCII(tc.in, true))
		})
	}
}

// FuzzPrefixLines holds PrefixLines to the same on decoded text, over a
// run of events that splits lines between them, with each way of quoting.
func FuzzPrefixLines(f *testing.F) {
	f.Add("one\ntwo\nthree", uint8(5), false)
	f.Add("\n\n\\n\"é😀\n", uint8(1), true)
	f.Fuzz(func(t *testing.T, s string, cut uint8, longNewlines bool) {
		if !utf8.ValidString(s) || len(s) > 4096 {
			return // long texts only repeat short ones, one piece at a time
		}
		var pieces []string
		for n := int(cut%16) + 1; len(s) > 0; {
			n = min(n, len(s))
			for n < len(s) && !utf8.RuneStart(s[n]) {
				n++
			}
			pieces = append(pieces, s[:n])
			s = s[n:]
		}
		var got, want strings.Builder
		gotMid, wantMid := false, false
		for _, p := range pieces {
			q := quoteASCII(p, longNewlines)
			var out QuotedString
			out, gotMid = q.PrefixLines("[p] ", gotMid)
			if !json.Valid(out) {
				t.Fatalf("PrefixLines(%s) = %s: not JSON", q, out)
			}
			got.WriteString(out.Text())
			var w string
			w, wantMid = prefixLinesText(p, "[p] ", wantMid)
			want.WriteString(w)
		}
		if got.String() != want.String() {
			t.Errorf("labelled %q, want %q", got.String(), want.String())
		}
	})
}
