package admission

import (
	"reflect"
	"strings"
	"unicode/utf8"
)

// Everything a worker says about itself (its hello, its task events, what
// its pydevd reports) comes from the cluster, which the proxy does not
// trust: it ends up in serve's terminal, the live view and the IDE's
// session names, where a control character is a command. ESC and C1 CSI
// start terminal sequences (window title, clipboard writes, erasing the
// line), a newline forges a line of sparkdap's own, and a bidi override
// makes text read other than it is. So such text is cleaned where it
// enters the proxy, and capped, since a hello may be 64 KiB of host name.

// Caps, in runes, on the fields people see. Generous for real values: a DNS
// name is at most 253 bytes; executor ids and task labels are short.
const (
	MaxHostRunes       = 255
	MaxExecutorIDRunes = 64
	MaxLabelRunes      = 200
	// MaxVersionRunes caps a sparkdap version a wrapper reports: a
	// release is "0.3.0", a build from a branch a little more.
	MaxVersionRunes = 64
	// MaxTextRunes caps other one-line text shown to people (a Python
	// version, where a worker stopped).
	MaxTextRunes = 200
	// MaxPathRunes caps a path shown to people.
	MaxPathRunes = 1024
	// MaxMessageRunes caps a line that may quote the cluster among other
	// things: an error message, a line of a report.
	MaxMessageRunes = 4096
)

// Clean returns s fit for one line of a terminal or an IDE's label: valid
// UTF-8, at most max runes (cut with "…"), with no control characters. A
// line-breaking control (tab, CR, LF, VT, FF, NEL, U+2028, U+2029) becomes a
// space; any other C0 control, DEL, C1 control (U+0080–U+009F), bidi
// control (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069) or invalid
// byte becomes U+FFFD, so that something visibly was there. Clean is
// idempotent, and returns s itself when it is already clean.
func Clean(s string, max int) string {
	if max <= 0 {
		return ""
	}
	if isClean(s, max) {
		return s
	}
	var b strings.Builder
	b.Grow(min(len(s), 4*max))
	n := 0
	for i, r := range s {
		if n == max-1 && hasMoreThan(s[i:], 1) {
			b.WriteString("…")
			break
		}
		if r == utf8.RuneError {
			// Invalid bytes come as RuneError of width 1; an encoded
			// U+FFFD stays what it is.
			r = '\uFFFD'
		}
		switch {
		case isBreak(r):
			r = ' '
		case isControl(r):
			r = '\uFFFD'
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// isClean reports whether Clean(s, max) would return s.
func isClean(s string, max int) bool {
	n := 0
	for i, r := range s {
		if n++; n > max {
			return false
		}
		if r == utf8.RuneError {
			if _, w := utf8.DecodeRuneInString(s[i:]); w == 1 {
				return false
			}
		}
		if isBreak(r) || isControl(r) {
			return false
		}
	}
	return true
}

// hasMoreThan reports whether s holds more than n runes.
func hasMoreThan(s string, n int) bool {
	for range s {
		if n--; n < 0 {
			return true
		}
	}
	return false
}

func isBreak(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', '\u0085', '\u2028', '\u2029':
		return true
	}
	return false
}

func isControl(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == '\u061c', r == '\u200e', r == '\u200f':
		return true
	case r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}

// Clean returns t with the fields people see cleaned and capped (Clean).
// The roots are paths the proxy maps, not shows, and stay as they are.
func (t TaskInfo) Clean() TaskInfo {
	t.ExecutorID = Clean(t.ExecutorID, MaxExecutorIDRunes)
	t.Host = Clean(t.Host, MaxHostRunes)
	t.Label = Clean(t.Label, MaxLabelRunes)
	return t
}

// CleanAll cleans (Clean, at most max runes) every string v reaches
// through pointers, structs, slices, arrays and maps: for a message made
// of what executors said, cleaned as a whole where it is encoded or
// decoded, so that no field, including one added later, reaches a
// terminal raw. v must be a pointer; unexported fields are left alone.
func CleanAll(v any, max int) {
	cleanValue(reflect.ValueOf(v), max, 0)
}

// maxCleanDepth bounds CleanAll's walk: a message is a few levels deep,
// and a cyclic value must not recurse forever.
const maxCleanDepth = 32

func cleanValue(v reflect.Value, max, depth int) {
	if depth > maxCleanDepth {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			cleanValue(v.Elem(), max, depth+1)
		}
	case reflect.Interface:
		// What an interface holds is not addressable: clean a copy and
		// put it back.
		if !v.IsNil() && v.CanSet() {
			e := reflect.New(v.Elem().Type()).Elem()
			e.Set(v.Elem())
			cleanValue(e, max, depth+1)
			v.Set(e)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				cleanValue(v.Field(i), max, depth+1)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			cleanValue(v.Index(i), max, depth+1)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			cleanValue(e, max, depth+1)
			ck := k
			if k.Kind() == reflect.String {
				ck = reflect.ValueOf(Clean(k.String(), max)).Convert(k.Type())
				v.SetMapIndex(k, reflect.Value{})
			}
			v.SetMapIndex(ck, e)
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(Clean(v.String(), max))
		}
	}
}
