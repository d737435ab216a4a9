package dap

import (
	"encoding/json"
	"slices"
	"strconv"
)

// appendJSON appends v encoded as encoding/json's Marshal would, byte for
// byte (a differential test holds it to that), without its reflection:
// generic JSON (maps with sorted keys, slices, strings, json.Number,
// bools, nil, integers) is written directly, and whatever else (floats,
// structs, strings that need escaping) is handed to json.Marshal. Encoding
// was a tenth of the proxy's own CPU per relayed request (bench Finding 1).
func appendJSON(dst []byte, v any) ([]byte, error) {
	switch t := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case Message:
		return appendJSONObject(dst, map[string]any(t))
	case map[string]any:
		return appendJSONObject(dst, t)
	case []any:
		if t == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, e := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendJSON(dst, e); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case string:
		return appendJSONString(dst, t)
	case json.Number:
		if t != "" && validNumber(string(t)) {
			return append(dst, t...), nil
		}
	case bool:
		return strconv.AppendBool(dst, t), nil
	case int:
		return strconv.AppendInt(dst, int64(t), 10), nil
	case int64:
		return strconv.AppendInt(dst, t, 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(t), 10), nil
	case uint64:
		return strconv.AppendUint(dst, t, 10), nil
	case uint32:
		return strconv.AppendUint(dst, uint64(t), 10), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(dst, b...), nil
}

func appendJSONObject(dst []byte, m map[string]any) ([]byte, error) {
	if m == nil {
		return append(dst, "null"...), nil
	}
	var small [16]string // DAP objects have few keys: no allocation for them
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendJSONString(dst, k); err != nil {
			return nil, err
		}
		dst = append(dst, ':')
		if dst, err = appendJSON(dst, m[k]); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendJSONString writes a string of printable ASCII that encoding/json
// leaves as it is directly; any other goes through json.Marshal, so its
// escapes (HTML characters, U+2028, invalid UTF-8) are encoding/json's.
func appendJSONString(dst []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			b, err := json.Marshal(s)
			if err != nil {
				return nil, err
			}
			return append(dst, b...), nil
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"'), nil
}

// validNumber reports whether s is a JSON number literal.
func validNumber(s string) bool {
	d := jsonDecoder{b: []byte(s)}
	if _, err := d.number(); err != nil {
		return false
	}
	return d.i == len(s)
}
