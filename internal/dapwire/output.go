package dapwire

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// Output events are most of what a worker that prints sends: pydevd turns
// each batch of a task's prints into one event whose "output" is up to
// 64 KiB of text. Decoding that text into a Go string (undoing its
// escapes), labelling it line by line and escaping it again for the IDE
// was most of the proxy's CPU per printed byte. DecodeOutputEvent keeps
// the text as it came instead, validated but still escaped, and
// QuotedString's methods label and count it in that form.

// QuotedString is a JSON string exactly as a peer sent it, quotes and
// escapes included: text a relay passes on without decoding it. Only
// DecodeOutputEvent and PrefixLines make one, and only from bytes that
// jsontext validated as one JSON string of valid UTF-8, so writing it
// into a message as it is keeps the message valid JSON. It is never
// changed after it is made: copies of a message share it.
type QuotedString []byte

// MarshalJSON is q as it is, for encoding/json.
func (q QuotedString) MarshalJSON() ([]byte, error) { return q, nil }

// Text decodes q.
func (q QuotedString) Text() string {
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		return "" // not reached: q was validated when it was made
	}
	return s
}

// AppendObject appends obj encoded as Message.Encode would, except that
// its QuotedString values are written as they are, where Encode has
// jsontext check and quote them again. It is how a relay writes a body
// that carries a large QuotedString.
func AppendObject(dst []byte, obj map[string]any) ([]byte, error) {
	var small [8]string
	keys := small[:0]
	size := 2
	for k, v := range obj {
		keys = append(keys, k)
		if q, ok := v.(QuotedString); ok {
			size += len(q)
		}
	}
	slices.Sort(keys)
	dst = slices.Grow(dst, size+16*len(keys))
	dst = append(dst, '{')
	// The other values are small: each is encoded on its own and copied,
	// so that the encoder's buffer is not the large one.
	var scratch [64]byte
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		enc, err := appendJSON(scratch[:0], k)
		if err != nil {
			return nil, err
		}
		dst = append(append(dst, enc...), ':')
		if q, ok := obj[k].(QuotedString); ok {
			dst = append(dst, q...)
			continue
		}
		if enc, err = appendJSON(scratch[:0], obj[k]); err != nil {
			return nil, err
		}
		dst = append(dst, enc...)
	}
	return append(dst, '}'), nil
}

// outputDecodeOptions are decodeOptions without their leniency: a
// duplicate key or invalid UTF-8 sends the message to DecodeMessage,
// which handles them as encoding/json does, rather than through as it is.
var outputDecodeOptions = []jsontext.Options{jsontext.AllowDuplicateNames(false), jsontext.AllowInvalidUTF8(false)}

// DecodeOutputEvent decodes body as DecodeMessage would, with the
// body's "output" kept as a QuotedString, if body is an output event of
// the shape pydevd sends: "type", "event", "seq", "pydevd_cmd_id" and a
// body of "output", "category" and an empty "source", in any order, and
// nothing else. It reports false for anything else, which the caller
// decodes with DecodeMessage.
func DecodeOutputEvent(body []byte) (Message, bool) {
	d := outputDecoderPool.Get().(*jsontext.Decoder)
	defer outputDecoderPool.Put(d)
	// The decoder reads straight from the buffer's bytes, so a value it
	// returns is a slice of body: the output is not copied.
	d.Reset(bytes.NewBuffer(body), outputDecodeOptions...)
	m, ok := decodeOutputEvent(d)
	d.Reset(bytes.NewBuffer(nil)) // drop its hold on body before it is pooled
	return m, ok
}

var outputDecoderPool = sync.Pool{New: func() any { return jsontext.NewDecoder(bytes.NewBuffer(nil)) }}

func decodeOutputEvent(d *jsontext.Decoder) (Message, bool) {
	if t, err := d.ReadToken(); err != nil || t.Kind() != '{' {
		return nil, false
	}
	m := make(Message, 5)
	for d.PeekKind() == '"' {
		name, err := d.ReadToken()
		if err != nil {
			return nil, false
		}
		switch key := name.String(); key {
		case "type", "event":
			v, err := d.ReadToken()
			if err != nil || v.Kind() != '"' {
				return nil, false
			}
			m[key] = v.String()
		case "seq", "pydevd_cmd_id":
			v, err := d.ReadToken()
			if err != nil || v.Kind() != '0' {
				return nil, false
			}
			m[key] = json.Number(v.String())
		case "body":
			b, ok := decodeOutputBody(d)
			if !ok {
				return nil, false
			}
			m[key] = b
		default:
			return nil, false
		}
	}
	if t, err := d.ReadToken(); err != nil || t.Kind() != '}' {
		return nil, false
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return nil, false
	}
	if m["type"] != "event" || m["event"] != "output" {
		return nil, false
	}
	if b, _ := m["body"].(map[string]any); b == nil || b["output"] == nil {
		return nil, false
	}
	return m, true
}

func decodeOutputBody(d *jsontext.Decoder) (map[string]any, bool) {
	if t, err := d.ReadToken(); err != nil || t.Kind() != '{' {
		return nil, false
	}
	b := make(map[string]any, 3)
	for d.PeekKind() == '"' {
		name, err := d.ReadToken()
		if err != nil {
			return nil, false
		}
		switch key := name.String(); key {
		case "output":
			if d.PeekKind() != '"' {
				return nil, false
			}
			v, err := d.ReadValue()
			if err != nil {
				return nil, false
			}
			b[key] = QuotedString(v)
		case "category":
			v, err := d.ReadToken()
			if err != nil || v.Kind() != '"' {
				return nil, false
			}
			b[key] = v.String()
		case "source":
			if t, err := d.ReadToken(); err != nil || t.Kind() != '{' {
				return nil, false
			}
			if t, err := d.ReadToken(); err != nil || t.Kind() != '}' {
				return nil, false
			}
			b[key] = map[string]any{}
		default:
			return nil, false
		}
	}
	if t, err := d.ReadToken(); err != nil || t.Kind() != '}' {
		return nil, false
	}
	return b, true
}

// eachEscape calls fn with the offset and length of each escape sequence
// in the JSON string content s, in order, and whether it stands for a
// newline. s is valid (QuotedString's contract), so every backslash starts
// a whole escape.
func eachEscape(s []byte, fn func(at, n int, newline bool)) {
	for i := 0; ; {
		j := bytes.IndexByte(s[i:], '\\')
		if j < 0 {
			return
		}
		j += i
		switch s[j+1] {
		case 'u':
			u := s[j+2 : j+6]
			fn(j, 6, u[0] == '0' && u[1] == '0' && u[2] == '0' && (u[3] == 'a' || u[3] == 'A'))
			i = j + 6
		default:
			fn(j, 2, s[j+1] == 'n')
			i = j + 2
		}
	}
}

// Len is the length in bytes of the text q stands for, as UTF-8.
func (q QuotedString) Len() int {
	s := q[1 : len(q)-1]
	n := len(s)
	eachEscape(s, func(at, esc int, _ bool) {
		if esc == 2 {
			n--
			return
		}
		// \uXXXX: a surrogate half counts as half of its pair's four
		// bytes; a lone one decodes to U+FFFD, whose three bytes this
		// undercounts by one.
		r := rune(hexValue(s[at+2 : at+6]))
		switch {
		case r < 0x80:
			n -= 5
		case r < 0x800:
			n -= 4
		case r >= 0xd800 && r < 0xe000:
			n -= 4
		default:
			n -= 3
		}
	})
	return n
}

func hexValue(h []byte) int {
	v := 0
	for _, c := range h {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= int(c - '0')
		case c >= 'a' && c <= 'f':
			v |= int(c-'a') + 10
		case c >= 'A' && c <= 'F':
			v |= int(c-'A') + 10
		}
	}
	return v
}

// PrefixLines returns q with prefix put before each line that starts in
// it: after each newline but a final one, and at the start unless midLine
// (q goes on with the line the text before it left open). prefix is
// text, escaped here once. It also reports whether q ends in the middle
// of a line, the midLine of the text after it. The result is made in one
// allocation, copying the text between newlines as it is.
func (q QuotedString) PrefixLines(prefix string, midLine bool) (QuotedString, bool) {
	s := q[1 : len(q)-1]
	if len(s) == 0 {
		return q, midLine
	}
	var newlines, lastEnd int
	eachEscape(s, func(at, n int, newline bool) {
		if newline {
			newlines++
			lastEnd = at + n
		}
	})
	endsMid := newlines == 0 || lastEnd != len(s)
	starts := newlines
	if endsMid {
		starts++
	}
	if midLine {
		starts--
	}
	if starts == 0 {
		return q, endsMid
	}
	p, err := jsontext.AppendQuote(nil, prefix)
	if err != nil {
		p, _ = jsontext.AppendQuote(nil, "") // not reached: AppendQuote replaces invalid UTF-8
	}
	p = p[1 : len(p)-1]
	out := make([]byte, 0, len(q)+starts*len(p))
	out = append(out, '"')
	if !midLine {
		out = append(out, p...)
	}
	from := 0
	eachEscape(s, func(at, n int, newline bool) {
		if !newline || at+n == len(s) {
			return
		}
		out = append(out, s[from:at+n]...)
		out = append(out, p...)
		from = at + n
	})
	out = append(out, s[from:]...)
	out = append(out, '"')
	return QuotedString(out), endsMid
}
