package dapwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// The wire's JSON is tokenized and quoted by jsontext (the Go team's JSON
// v2 prototype, which becomes encoding/json/v2): the bytes come from an
// untrusted cluster, and a tokenizer is not ours to own. This file only
// builds and walks generic JSON on top of its tokens.
//
// decodeObject and appendJSON replaced encoding/json's Decoder and
// Marshal, whose scanning twice and reflection were the largest part of
// the proxy's own CPU per relayed request after its syscalls (measured in
// bench/README.md). Differential tests hold both to encoding/json.

// decodeOptions make jsontext accept what encoding/json accepts: a
// duplicate key (the last wins) and invalid UTF-8 or lone surrogates in
// strings (made U+FFFD). Nesting is limited by jsontext (10,000 levels,
// encoding/json's limit too).
var decodeOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// decodeObject parses one JSON object into generic JSON (map[string]any,
// []any, string, json.Number, bool, nil), as encoding/json's Decoder with
// UseNumber would, in one pass. Anything but white space after the object
// is an error (encoding/json's Decoder let a stray "}" or "]" through).
func decodeObject(b []byte) (map[string]any, error) {
	d := decoderPool.Get().(*jsontext.Decoder)
	defer decoderPool.Put(d)
	d.Reset(bytes.NewBuffer(b), decodeOptions...)
	if k := d.PeekKind(); k != '{' {
		return nil, errors.New("not a JSON object")
	}
	v, err := decodeValue(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after JSON object at offset %d", d.InputOffset())
	}
	return v.(map[string]any), nil
}

var decoderPool = sync.Pool{New: func() any { return jsontext.NewDecoder(bytes.NewBuffer(nil)) }}

// decodeValue reads the next value from d as generic JSON.
func decodeValue(d *jsontext.Decoder) (any, error) {
	t, err := d.ReadToken()
	if err != nil {
		return nil, err
	}
	switch t.Kind() {
	case '{':
		m := map[string]any{}
		for d.PeekKind() != '}' {
			k, err := d.ReadToken() // a name, or jsontext's error
			if err != nil {
				return nil, err
			}
			name := k.String()
			v, err := decodeValue(d)
			if err != nil {
				return nil, err
			}
			m[name] = v
		}
		if _, err := d.ReadToken(); err != nil {
			return nil, err
		}
		return m, nil
	case '[':
		a := make([]any, 0)
		for d.PeekKind() != ']' {
			v, err := decodeValue(d)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		if _, err := d.ReadToken(); err != nil {
			return nil, err
		}
		return a, nil
	case '"':
		return t.String(), nil
	case '0':
		return json.Number(t.String()), nil // its text kept exactly
	case 't':
		return true, nil
	case 'f':
		return false, nil
	case 'n':
		return nil, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", t.Kind())
}

// encodeOptions make jsontext escape what json.Marshal escapes: <, > and &
// (json.Marshal's default, which DAP clients accept either way) and
// U+2028/U+2029. Invalid UTF-8 in a string becomes U+FFFD, as with
// json.Marshal, but written as the character where json.Marshal writes
// the escape \ufffd: the same string to any JSON reader (a decoded
// message has no invalid UTF-8 left, so this only concerns strings the
// proxy makes). Keys are allowed to repeat since two keys that differ only
// in invalid bytes are written the same, as json.Marshal writes them.
var encodeOptions = []jsontext.Options{jsontext.EscapeForHTML(true), jsontext.EscapeForJS(true),
	jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true)}

var encoderPool = sync.Pool{New: func() any { return jsontext.NewEncoder(new(bytes.Buffer)) }}

// appendJSON appends v encoded as encoding/json's Marshal would (a
// differential test holds it to that, up to the U+FFFD above), without its
// reflection: generic JSON (maps with sorted keys, slices, strings,
// json.Number, bools, nil, integers) is walked here and written through
// jsontext, and whatever else (floats, structs) is handed to json.Marshal.
func appendJSON(dst []byte, v any) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	e := encoderPool.Get().(*jsontext.Encoder)
	e.Reset(buf, encodeOptions...)
	err := encodeValue(e, v)
	e.Reset(io.Discard) // drop its hold on buf before it is pooled
	encoderPool.Put(e)
	if err != nil {
		return nil, err
	}
	out := buf.Bytes()
	return out[:len(out)-1], nil // jsontext ends each top-level value with a newline
}

func encodeValue(e *jsontext.Encoder, v any) error {
	switch t := v.(type) {
	case nil:
		return e.WriteToken(jsontext.Null)
	case Message:
		return encodeObject(e, map[string]any(t))
	case map[string]any:
		return encodeObject(e, t)
	case []any:
		if t == nil {
			return e.WriteToken(jsontext.Null)
		}
		if err := e.WriteToken(jsontext.BeginArray); err != nil {
			return err
		}
		for _, x := range t {
			if err := encodeValue(e, x); err != nil {
				return err
			}
		}
		return e.WriteToken(jsontext.EndArray)
	case string:
		return e.WriteToken(jsontext.String(t))
	case QuotedString:
		return e.WriteValue(jsontext.Value(t))
	case json.Number:
		if t != "" { // json.Marshal writes "" as 0
			return e.WriteValue(jsontext.Value(t)) // refused unless a number
		}
	case bool:
		return e.WriteToken(jsontext.Bool(t))
	case int:
		return e.WriteToken(jsontext.Int(int64(t)))
	case int64:
		return e.WriteToken(jsontext.Int(t))
	case int32:
		return e.WriteToken(jsontext.Int(int64(t)))
	case uint64:
		return e.WriteToken(jsontext.Uint(t))
	case uint32:
		return e.WriteToken(jsontext.Uint(uint64(t)))
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return e.WriteValue(b)
}

func encodeObject(e *jsontext.Encoder, m map[string]any) error {
	if m == nil {
		return e.WriteToken(jsontext.Null)
	}
	var small [16]string // DAP objects have few keys: no allocation for them
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if err := e.WriteToken(jsontext.BeginObject); err != nil {
		return err
	}
	for _, k := range keys {
		if err := e.WriteToken(jsontext.String(k)); err != nil {
			return err
		}
		if err := encodeValue(e, m[k]); err != nil {
			return err
		}
	}
	return e.WriteToken(jsontext.EndObject)
}
