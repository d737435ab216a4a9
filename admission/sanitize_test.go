package admission

import (
	"bufio"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// controlIn returns the first control character Clean must remove from s,
// or -1: what a terminal or an IDE label would act on.
func controlIn(s string) rune {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, w := utf8.DecodeRuneInString(s[i:]); w == 1 {
				return r
			}
		}
		if isBreak(r) || isControl(r) {
			return r
		}
	}
	return -1
}

func TestClean(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		max      int
		want     string
	}{
		{"plain", "node-7.example.com", 50, "node-7.example.com"},
		{"unicode kept", "exec 1 · nœud-7 · 节点", 50, "exec 1 · nœud-7 · 节点"},
		{"OSC window title", "\x1b]0;pwned\x07h", 50, "\uFFFD]0;pwned\uFFFDh"},
		{"OSC 52 clipboard", "\x1b]52;c;ZWNobyBoaQ==\x1b\\", 50, "\uFFFD]52;c;ZWNobyBoaQ==\uFFFD\\"},
		{"erase line", "\x1b[2Kx", 50, "\uFFFD[2Kx"},
		{"forged line", "h\r\nsparkdap: fake", 50, "h  sparkdap: fake"},
		{"tab", "a\tb", 50, "a b"},
		{"C1 CSI", "\u009b2J", 50, "\uFFFD2J"},
		{"NEL and line separator", "a\u0085b\u2028c\u2029d", 50, "a b c d"},
		{"DEL and NUL", "a\x7fb\x00c", 50, "a\uFFFDb\uFFFDc"},
		{"bidi override", "exe\u202Egnp.\u202C", 50, "exe\uFFFDgnp.\uFFFD"},
		{"bidi isolates and marks", "\u2066a\u2069\u200eb\u200f\u061c", 50, "\uFFFDa\uFFFD\uFFFDb\uFFFD\uFFFD"},
		{"invalid UTF-8", "a\xffb\xc3", 50, "a\uFFFDb\uFFFD"},
		{"encoded U+FFFD kept", "a\uFFFDb", 50, "a\uFFFDb"},
		{"capped", "abcdefgh", 5, "abcd…"},
		{"exactly the cap", "abcde", 5, "abcde"},
		{"capped in runes", "ééééé€€", 6, "ééééé…"},
		{"cap of one", "ab", 1, "…"},
		{"cap of zero", "ab", 0, ""},
		{"empty", "", 5, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Clean(tt.in, tt.max)
			if got != tt.want {
				t.Errorf("Clean(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
			}
			if again := Clean(got, tt.max); again != got {
				t.Errorf("not idempotent: %q, then %q", got, again)
			}
		})
	}
}

// TestHelloFieldsCleanedOnEntry: what a hostile hello says about itself
// reaches nobody raw, and its label has no line to forge.
func TestHelloFieldsCleanedOnEntry(t *testing.T) {
	evil := "\x1b]0;owned\x07\x1b[2K\r\nsparkdap: fake\u009b2J\u202e"
	line := fmt.Sprintf(HelloPrefix+`{"pid":7,"host":%q,"executorId":%q,"label":%q}`+"\n",
		evil+strings.Repeat("h", 60000), evil, evil)
	// %q writes Go escapes; JSON wants \u escapes for the same bytes.
	line = strings.NewReplacer(`\x1b`, `\u001b`, `\a`, `\u0007`, `\r`, `\r`, `\n`, `\n`).Replace(line)
	h, err := ReadHello(bufio.NewReader(strings.NewReader(line)))
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"host": h.Host, "executorId": h.ExecutorID, "label": h.Label, "Label()": Label(h.TaskInfo)} {
		if r := controlIn(v); r >= 0 {
			t.Errorf("%s keeps control %U: %q", name, r, v)
		}
	}
	if n := utf8.RuneCountInString(h.Host); n > MaxHostRunes {
		t.Errorf("host of %d runes, cap %d", n, MaxHostRunes)
	}
	if !strings.Contains(h.Label, "sparkdap: fake") {
		t.Errorf("label %q lost its visible text", h.Label)
	}
	// Label cleans even a TaskInfo that did not come through ReadHello.
	if got := Label(TaskInfo{Host: "a\nb", Label: "\x1b[2K"}); controlIn(got) >= 0 {
		t.Errorf("Label of a raw TaskInfo: %q", got)
	}
}

// TestSparkdapVersionCleanedOnEntry: the version a wrapper reports is
// shown by doctor and kept by the proxy, so ReadHello cleans and caps it
// like the other text a hello carries; a hello without one (an older
// wrapper) reads as "".
func TestSparkdapVersionCleanedOnEntry(t *testing.T) {
	for _, tt := range []struct {
		name string
		json string // the hello's sparkdapVersion member, "" for none
		want string
	}{
		{"release", `"sparkdapVersion":"0.3.0",`, "0.3.0"},
		{"pre-release and build", `"sparkdapVersion":"0.4.0-rc.1+g1234567",`, "0.4.0-rc.1+g1234567"},
		{"absent: an older wrapper", ``, ""},
		{"empty", `"sparkdapVersion":"",`, ""},
		{"terminal sequence", `"sparkdapVersion":"\u001b]0;owned\u0007\u001b[2K0.3.0",`, "\uFFFD]0;owned\uFFFD\uFFFD[2K0.3.0"},
		{"forged line", `"sparkdapVersion":"0.3.0\r\nsparkdap: fake",`, "0.3.0  sparkdap: fake"},
		{"C1 CSI and DEL", `"sparkdapVersion":"\u009b2J0.3\u007f",`, "\uFFFD2J0.3\uFFFD"},
		{"bidi override", `"sparkdapVersion":"\u202e0.3.0",`, "\uFFFD0.3.0"},
		{"capped", `"sparkdapVersion":"` + strings.Repeat("9", 100) + `",`, strings.Repeat("9", MaxVersionRunes-1) + "…"},
		{"exactly the cap", `"sparkdapVersion":"` + strings.Repeat("9", MaxVersionRunes) + `",`, strings.Repeat("9", MaxVersionRunes)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			line := HelloPrefix + `{` + tt.json + `"pid":7,"host":"h"}` + "\n"
			h, err := ReadHello(bufio.NewReader(strings.NewReader(line)))
			if err != nil {
				t.Fatal(err)
			}
			if h.SparkdapVersion != tt.want {
				t.Errorf("SparkdapVersion %q, want %q", h.SparkdapVersion, tt.want)
			}
			if r := controlIn(h.SparkdapVersion); r >= 0 {
				t.Errorf("keeps control %U: %q", r, h.SparkdapVersion)
			}
		})
	}
}

func FuzzClean(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b]0;t\x07", "a\r\nsparkdap: x", "\u009b\u202e\u2066", "\xff\xfe\xc3", "ééé€"} {
		f.Add(s, 8)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		max %= 300
		got := Clean(s, max)
		if r := controlIn(got); r >= 0 {
			t.Fatalf("Clean(%q, %d) = %q keeps %U", s, max, got, r)
		}
		if n := utf8.RuneCountInString(got); n > max && !(max <= 0 && n == 0) {
			t.Fatalf("Clean(%q, %d) = %q: %d runes", s, max, got, n)
		}
		if again := Clean(got, max); again != got {
			t.Fatalf("not idempotent: %q then %q", got, again)
		}
		if max > 0 && controlIn(s) < 0 && utf8.RuneCountInString(s) <= max && got != s {
			t.Fatalf("a clean %q changed to %q", s, got)
		}
	})
}

// TestCleanAll: every string a message reaches is cleaned, in nested
// structs, pointers, slices, maps (keys too) and interfaces; numbers and
// unexported fields are left alone.
func TestCleanAll(t *testing.T) {
	type inner struct {
		Name  string
		Line  int
		Notes []string
	}
	type kind string
	type msg struct {
		Error  string
		Kind   kind
		Items  []inner
		Ptr    *inner
		Nil    *inner
		Map    map[string]any
		Any    any
		hidden string
	}
	bad := "\x1b]52;c;ZWNobyBoaQ==\x07\x1b]0;pwned\x07\r\x1b[2Ksparkdap: ok"
	m := &msg{Error: bad, Kind: kind(bad), Items: []inner{{Name: bad, Line: 7, Notes: []string{bad}}}, Ptr: &inner{Name: bad},
		Map: map[string]any{bad: bad, "n": []any{bad, 3.0}, "s": inner{Name: bad}}, Any: bad, hidden: bad}
	CleanAll(m, 100)
	got := fmt.Sprintf("%v %v %v %v %v %v", m.Error, m.Kind, m.Items, *m.Ptr, m.Map, m.Any)
	if r := controlIn(got); r != -1 || strings.Contains(got, "\x1b") {
		t.Errorf("control %U left in %q", r, got)
	}
	if m.Items[0].Line != 7 || m.hidden != bad || m.Nil != nil {
		t.Errorf("changed what it must not: %+v", m)
	}
	if m.Error != Clean(bad, 100) {
		t.Errorf("Error = %q, want Clean's %q", m.Error, Clean(bad, 100))
	}
}
