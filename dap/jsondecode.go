package dap

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// decodeObject parses one JSON object into generic JSON (map[string]any,
// []any, string, json.Number, bool, nil), as encoding/json's Decoder with
// UseNumber would, in one pass: that Decoder scans every message twice
// (once to find its end, once to decode it) and was the largest part of
// the proxy's own CPU per relayed request after its syscalls (bench
// Finding 1). What it accepts and what it makes are encoding/json's (a
// differential fuzz test holds it to that), except that anything but
// white space after the object is an error (the Decoder let a stray "}" or
// "]" through). Strings with escapes or bytes that are not UTF-8 are
// unquoted by encoding/json itself, so their U+FFFD replacements match.
func decodeObject(b []byte) (map[string]any, error) {
	d := jsonDecoder{b: b}
	d.space()
	if d.i >= len(d.b) || d.b[d.i] != '{' {
		return nil, errors.New("not a JSON object")
	}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	d.space()
	if d.i != len(d.b) {
		return nil, fmt.Errorf("trailing data after JSON object at offset %d", d.i)
	}
	return v.(map[string]any), nil
}

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

// jsonDecoder is decodeObject's cursor over one message.
type jsonDecoder struct {
	b []byte
	i int
}

func (d *jsonDecoder) errAt(what string) error {
	if d.i >= len(d.b) {
		return fmt.Errorf("unexpected end of JSON input (%s)", what)
	}
	return fmt.Errorf("invalid character %q at offset %d (%s)", d.b[d.i], d.i, what)
}

func (d *jsonDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *jsonDecoder) value(depth int) (any, error) {
	if d.i >= len(d.b) {
		return nil, d.errAt("looking for a value")
	}
	switch c := d.b[d.i]; {
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		return d.str()
	case c == '-' || ('0' <= c && c <= '9'):
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	}
	return nil, d.errAt("looking for a value")
}

func (d *jsonDecoder) literal(lit string) error {
	if len(d.b)-d.i < len(lit) || string(d.b[d.i:d.i+len(lit)]) != lit {
		for j := 0; j < len(lit) && d.i < len(d.b) && d.b[d.i] == lit[j]; j++ {
			d.i++
		}
		return d.errAt("in literal " + lit)
	}
	d.i += len(lit)
	return nil
}

func (d *jsonDecoder) object(depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, errors.New("exceeded max depth")
	}
	d.i++ // '{'
	m := map[string]any{}
	d.space()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
		return m, nil
	}
	for {
		if d.i >= len(d.b) || d.b[d.i] != '"' {
			return nil, d.errAt("looking for an object key")
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		d.space()
		if d.i >= len(d.b) || d.b[d.i] != ':' {
			return nil, d.errAt("after an object key")
		}
		d.i++
		d.space()
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		m[k] = v
		d.space()
		if d.i >= len(d.b) {
			return nil, d.errAt("after an object value")
		}
		switch d.b[d.i] {
		case ',':
			d.i++
			d.space()
		case '}':
			d.i++
			return m, nil
		default:
			return nil, d.errAt("after an object value")
		}
	}
}

func (d *jsonDecoder) array(depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, errors.New("exceeded max depth")
	}
	d.i++ // '['
	a := make([]any, 0)
	d.space()
	if d.i < len(d.b) && d.b[d.i] == ']' {
		d.i++
		return a, nil
	}
	for {
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		d.space()
		if d.i >= len(d.b) {
			return nil, d.errAt("after an array element")
		}
		switch d.b[d.i] {
		case ',':
			d.i++
			d.space()
		case ']':
			d.i++
			return a, nil
		default:
			return nil, d.errAt("after an array element")
		}
	}
}

// str reads a string. One with no escapes that is valid UTF-8 (nearly
// every string) is copied as it is; any other is unquoted by encoding/json.
func (d *jsonDecoder) str() (string, error) {
	start := d.i
	d.i++ // '"'
	plain := true
	for {
		if d.i >= len(d.b) {
			return "", d.errAt("in string literal")
		}
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			lit := d.b[start:d.i]
			if plain {
				return string(lit[1 : len(lit)-1]), nil
			}
			var s string
			if err := json.Unmarshal(lit, &s); err != nil {
				return "", err
			}
			return s, nil
		case c == '\\':
			plain = false
			d.i++
			if d.i >= len(d.b) {
				return "", d.errAt("in string escape code")
			}
			switch d.b[d.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i++
			case 'u':
				d.i++
				for range 4 {
					if d.i >= len(d.b) || !isHex(d.b[d.i]) {
						return "", d.errAt("in \\u hexadecimal character escape")
					}
					d.i++
				}
			default:
				return "", d.errAt("in string escape code")
			}
		case c < 0x20:
			return "", d.errAt("in string literal")
		case c < utf8.RuneSelf:
			d.i++
		default:
			r, size := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError && size == 1 {
				plain = false // encoding/json makes it U+FFFD
			}
			d.i += size
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number reads a number literal as json.Number, its text kept exactly.
func (d *jsonDecoder) number() (any, error) {
	start := d.i
	if d.b[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.b) && d.b[d.i] == '0':
		d.i++
	case d.i < len(d.b) && isDigit(d.b[d.i]):
		for d.i < len(d.b) && isDigit(d.b[d.i]) {
			d.i++
		}
	default:
		return nil, d.errAt("in numeric literal")
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if d.i >= len(d.b) || !isDigit(d.b[d.i]) {
			return nil, d.errAt("after decimal point in numeric literal")
		}
		for d.i < len(d.b) && isDigit(d.b[d.i]) {
			d.i++
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if d.i >= len(d.b) || !isDigit(d.b[d.i]) {
			return nil, d.errAt("in exponent of numeric literal")
		}
		for d.i < len(d.b) && isDigit(d.b[d.i]) {
			d.i++
		}
	}
	return json.Number(d.b[start:d.i]), nil
}
