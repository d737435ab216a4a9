package pycharm

import (
	"bufio"
	"strings"
	"testing"
)

func TestParseLine(t *testing.T) {
	tests := []struct {
		line    string
		want    Message
		wantErr bool
	}{
		{"501\t1\t1.1\tUNIX\tID", Message{501, 1, "1.1\tUNIX\tID"}, false},
		{"101\t5\t", Message{101, 5, ""}, false},
		{"101\t5", Message{101, 5, ""}, false},
		{"105\t4\t<xml>a%20b</xml>\r", Message{105, 4, "<xml>a%20b</xml>"}, false},
		{"", Message{}, true},
		{"101", Message{}, true},
		{"x\t1\t", Message{}, true},
		{"101\ty\t", Message{}, true},
		{"-1\t1\t", Message{}, true},
	}
	for _, tc := range tests {
		got, err := ParseLine(tc.line)
		if (err != nil) != tc.wantErr || (!tc.wantErr && got != tc.want) {
			t.Errorf("ParseLine(%q) = %+v, %v; want %+v, err %v", tc.line, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestReadMessage(t *testing.T) {
	br := bufio.NewReader(strings.NewReader("\n501\t2\t263.7307.50\n\r\n105\t4\tx\n102\t6"))
	for _, want := range []Message{{501, 2, "263.7307.50"}, {105, 4, "x"}} {
		got, err := ReadMessage(br, 1024)
		if err != nil || got != want {
			t.Fatalf("got %+v, %v; want %+v", got, err, want)
		}
	}
	if _, err := ReadMessage(br, 1024); err == nil {
		t.Fatal("truncated last line: want an error")
	}
	if _, err := ReadMessage(bufio.NewReaderSize(strings.NewReader(strings.Repeat("1", 5000)+"\n"), 16), 100); err != ErrLineTooLong {
		t.Fatalf("long line: %v", err)
	}
}

// Python: urllib.parse.quote(s, '/<>_=" \t') and quote(s) for names.
func TestPyQuote(t *testing.T) {
	tests := []struct{ in, safe, want string }{
		{`<frame file="/a b/ü.py" line="3">`, payloadSafe, `<frame file="/a b/%C3%BC.py" line="3">`},
		{"a\nb%c&d", payloadSafe, "a%0Ab%25c%26d"},
		{"[exec 1 · h] MainThread", nameSafe, "%5Bexec%201%20%C2%B7%20h%5D%20MainThread"},
		{"~-._", "", "~-._"},
	}
	for _, tc := range tests {
		if got := PyQuote(tc.in, tc.safe); got != tc.want {
			t.Errorf("PyQuote(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if back := PyUnquote(tc.want); back != tc.in {
			t.Errorf("PyUnquote(%q) = %q, want %q", tc.want, back, tc.in)
		}
	}
	if got := PyUnquote("100%+%zz%4"); got != "100%+%zz%4" {
		t.Errorf("bad escapes must stay: %q", got)
	}
}

func TestRoutedThread(t *testing.T) {
	tests := []struct {
		payload string
		thread  string
		all     bool
	}{
		{"pid_42_id_7", "pid_42_id_7", false},
		{"pid_42_id_7\t140\tFRAME\t0", "pid_42_id_7", false},
		{"0\t0\t-1\t-1\t%\tpid_9_id_1\t33\tFRAME\tx", "pid_9_id_1", false}, // GET_ARRAY
		{"*", "", true},
		{"__frame__:12|pid_3_id_4\tx", "pid_3_id_4", false},
		{"1\tpython-line\t/a.py\t3", "", false},
		{"pid_x_id_1", "", false},
	}
	for _, tc := range tests {
		th, all := RoutedThread(tc.payload)
		if th != tc.thread || all != tc.all {
			t.Errorf("RoutedThread(%q) = %q, %v; want %q, %v", tc.payload, th, all, tc.thread, tc.all)
		}
	}
	if pid, ok := ThreadPID("pid_4242_id_140145908265936"); !ok || pid != 4242 {
		t.Errorf("ThreadPID: %d %v", pid, ok)
	}
}

func TestBreakpointKey(t *testing.T) {
	tests := []struct {
		m         Message
		key, file string
		ok        bool
	}{
		{Message{CmdSetBreak, 3, "7\tpython-line\t/src/a.py\t12\tNone\tNone\tNone\tNone\tFalse\tNONE"}, "python-line\t/src/a.py\t7", "/src/a.py", true},
		{Message{CmdSetBreak, 3, "python-line\t/src/a.py\t12\tNone\tNONE\tNone\tNone"}, "python-line\t/src/a.py\t12", "/src/a.py", true},
		{Message{CmdRemoveBreak, 5, "python-line\t/src/a.py\t7"}, "python-line\t/src/a.py\t7", "/src/a.py", true},
		{Message{CmdRemoveBreak, 5, "python-line"}, "", "", false},
		{Message{CmdRun, 5, ""}, "", "", false},
	}
	for _, tc := range tests {
		key, file, ok := BreakpointKey(tc.m)
		if key != tc.key || file != tc.file || ok != tc.ok {
			t.Errorf("BreakpointKey(%v) = %q %q %v", tc.m, key, file, ok)
		}
		if ok {
			m2 := WithBreakpointFile(tc.m, "/remote/a.py")
			if _, f2, _ := BreakpointKey(m2); f2 != "/remote/a.py" {
				t.Errorf("WithBreakpointFile(%v) = %v", tc.m, m2)
			}
		}
	}
}

func TestRewriteFrameFiles(t *testing.T) {
	in := PyQuote(`<xml><thread id="pid_1_id_2" stop_reason="111"><frame id="9" name="scale" file="/tmp/userFiles-x/m&amp;n.py" line="6"></frame>`+
		`<frame id="8" name="main" file="/other.py" line="1"></frame></thread></xml>`, payloadSafe)
	out := RewriteFrameFiles(in, func(r string) string {
		if r == "/tmp/userFiles-x/m&n.py" {
			return `/home/dev/src/m&n "q".py`
		}
		return r
	})
	want := `<frame id="9" name="scale" file="/home/dev/src/m&amp;n &quot;q&quot;.py" line="6">`
	if !strings.Contains(PyUnquote(out), want) || !strings.Contains(PyUnquote(out), `file="/other.py"`) {
		t.Errorf("rewritten: %s", PyUnquote(out))
	}
	if same := RewriteFrameFiles(in, func(r string) string { return r }); same != in {
		t.Errorf("an identity rewrite changed the payload")
	}
}

func TestDropPlumbingFrames(t *testing.T) {
	frame := func(id, name, file string) string {
		return `<frame id="` + id + `" name="` + name + `" file="` + file + `" line="3"></frame>`
	}
	suspend := func(frames ...string) string {
		return `<xml><thread id="pid_1_id_2" stop_reason="111">` + strings.Join(frames, "") + `</thread></xml>`
	}
	user := frame("9", "scale", "/tmp/userFiles-x/math_udf.py")
	spark := frame("8", "main", "/opt/spark/python/lib/pyspark.zip/pyspark/worker.py")
	wrapper := frame("7", "_run", "/tmp/spark-1/remote_debug.py")
	daemon := frame("6", "manager", "/opt/spark/python/lib/pyspark.zip/pyspark/daemon.py")
	for _, tc := range []struct {
		name     string
		in, want string
	}{
		{"wrapper and daemon frames go", suspend(user, spark, wrapper, wrapper, daemon), suspend(user, spark)},
		{"nothing to drop", suspend(user, spark), suspend(user, spark)},
		{"a stop inside the wrapper keeps its frames", suspend(wrapper, daemon), suspend(wrapper, daemon)},
		{"a user file named like the daemon elsewhere stays", suspend(user, frame("5", "f", "/home/dev/daemon.py")), suspend(user, frame("5", "f", "/home/dev/daemon.py"))},
		{"a thread stack answer (no thread element)", user + wrapper, user},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := PyQuote(tc.in, payloadSafe)
			out := DropPlumbingFrames(in)
			if got := PyUnquote(out); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if tc.in == tc.want && out != in {
				t.Errorf("the payload changed though no frame went")
			}
		})
	}
}

func TestPrefixThreadNames(t *testing.T) {
	in := PyQuote(`<xml><thread name="`+PyQuote("Main Thread", nameSafe)+`" id="pid_1_id_2" /></xml>`, payloadSafe)
	out := PrefixThreadNames(in, "[exec 1 · p 0] ")
	if ids := ThreadIDs(out); len(ids) != 1 || ids[0] != "pid_1_id_2" {
		t.Errorf("ids %v", ids)
	}
	m := threadNameRE.FindStringSubmatch(PyUnquote(out))
	if m == nil || PyUnquote(m[2]) != "[exec 1 · p 0] Main Thread" {
		t.Errorf("name in %q", PyUnquote(out))
	}
	if again := PrefixThreadNames(out, "[exec 1 · p 0] "); again != out {
		t.Errorf("prefixing twice changed the name")
	}
}

func FuzzParseLine(f *testing.F) {
	for _, s := range []string{"501\t1\t1.1\tUNIX\tID", "105\t4\t<xml><thread id=\"pid_1_id_2\"></thread></xml>",
		"101\t5", "\t\t", "9999999999999999999999\t1\t", "102\t-3\tx", "111\t3\t1\tpython-line\t/a.py\t3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		m, err := ParseLine(line)
		if err != nil {
			return
		}
		if strings.ContainsAny(line, "\r\n") { // CR is trimmed as CRLF tolerance
			return
		}
		back, err := ParseLine(strings.TrimSuffix(string(m.Marshal()), "\n"))
		if err != nil || back != m {
			t.Fatalf("round trip of %q: %+v → %+v, %v", line, m, back, err)
		}
		_, _ = RoutedThread(m.Payload)
		_, _, _ = BreakpointKey(m)
		_ = RewriteFrameFiles(m.Payload, func(s string) string { return s + "x" })
		_ = PrefixThreadNames(m.Payload, "[p] ")
		if q := PyQuote(m.Payload, payloadSafe); PyUnquote(q) != m.Payload {
			t.Fatalf("quote round trip of %q", m.Payload)
		}
	})
}

func TestWithAnyFunction(t *testing.T) {
	tests := []struct{ in, want Message }{
		{Message{CmdSetBreak, 3, "python-line\t/a.py\t12\tmain\tALL\tNone\tNone"}, Message{CmdSetBreak, 3, "python-line\t/a.py\t12\tNone\tALL\tNone\tNone"}},
		{Message{CmdSetBreak, 3, "7\tpython-line\t/a.py\t12\tmain\tNone\tNone\tNone\tFalse\tALL"}, Message{CmdSetBreak, 3, "7\tpython-line\t/a.py\t12\tNone\tNone\tNone\tNone\tFalse\tALL"}},
		{Message{CmdSetBreak, 3, "python-line\t/a.py\t12"}, Message{CmdSetBreak, 3, "python-line\t/a.py\t12"}},
		{Message{CmdRemoveBreak, 3, "python-line\t/a.py\t12"}, Message{CmdRemoveBreak, 3, "python-line\t/a.py\t12"}},
	}
	for _, tc := range tests {
		if got := WithAnyFunction(tc.in); got != tc.want {
			t.Errorf("WithAnyFunction(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
