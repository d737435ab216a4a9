package pycharm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/sparkdap/sparkdap/admission"
)

// Command ids of pydevd's line protocol, from _pydevd_bundle/
// pydevd_comm_constants.py of pydevd-pycharm 263.7307.50 (the ids have been
// stable for years; PyCharm's AbstractCommand uses the same numbers).
const (
	CmdRun               = 101
	CmdListThreads       = 102
	CmdThreadCreate      = 103
	CmdThreadKill        = 104
	CmdThreadSuspend     = 105
	CmdThreadRun         = 106
	CmdSetBreak          = 111
	CmdRemoveBreak       = 112
	CmdGetFrame          = 114
	CmdWriteToConsole    = 116
	CmdAddExceptionBreak = 122
	// CmdStepCaughtException is a suspend's stop_reason at a raised
	// exception; CmdSendCurrExceptionTrace carries its type first.
	CmdStepCaughtException     = 137
	CmdSendCurrExceptionTrace  = 138
	CmdRemoveExceptionBreak    = 123
	CmdAddDjangoExceptionBreak = 125
	CmdRemoveDjangoExcBreak    = 126
	CmdExit                    = 129
	CmdSetPyException          = 131
	CmdSetPropertyTrace        = 133
	CmdGetArray                = 143
	CmdEnableDontTrace         = 141
	CmdShowConsole             = 142
	CmdShowReturnValues        = 146
	CmdInputRequested          = 147
	CmdProcessCreated          = 149
	CmdShowCythonWarning       = 150
	CmdStopOnStart             = 154
	CmdPydevdJSONConfig        = 156
	CmdSetUnitTestDebugging    = 170
	CmdSetUserTypeRenderers    = 190
	CmdRedirectOutput          = 200
	CmdSetProjectRoots         = 202
	CmdVersion                 = 501
	CmdReturn                  = 502
	CmdSetProtocol             = 503
	CmdError                   = 901

	// CmdSparkdapTask is sparkdap's own: the generated wrapper sends it
	// through pydevd's writer when a reused worker starts a new task, with
	// the task as JSON. The proxy consumes it; PyCharm never sees it.
	CmdSparkdapTask = 7901
)

// MaxLineBytes bounds one protocol line; pydevd's variable dumps can be
// large, so the bound is generous.
const MaxLineBytes = 64 << 20

// Message is one line of pydevd's protocol. Payload is kept as it was on the
// wire: URL-quoted when pydevd sent it, raw tab-separated fields when
// PyCharm did.
type Message struct {
	ID      int
	Seq     int
	Payload string
}

// Marshal renders m as one protocol line, newline included.
func (m Message) Marshal() []byte {
	return []byte(strconv.Itoa(m.ID) + "\t" + strconv.Itoa(m.Seq) + "\t" + m.Payload + "\n")
}

func (m Message) String() string { return fmt.Sprintf("%d/%d %.120q", m.ID, m.Seq, m.Payload) }

// ErrLineTooLong is returned for a line over the reader's limit.
var ErrLineTooLong = errors.New("pydevd protocol line too long")

// ParseLine parses one line without its newline. pydevd splits at the first
// two tabs only; a line with no payload (one tab, or "ID\tSEQ") has an empty
// one. A trailing carriage return is tolerated.
func ParseLine(line string) (Message, error) {
	line = strings.TrimSuffix(line, "\r")
	idText, rest, ok := strings.Cut(line, "\t")
	if !ok {
		return Message{}, fmt.Errorf("malformed pydevd line %.80q: no tab", line)
	}
	seqText, payload, _ := strings.Cut(rest, "\t")
	id, err := strconv.Atoi(idText)
	if err != nil || id < 0 {
		return Message{}, fmt.Errorf("malformed pydevd line %.80q: bad command id", line)
	}
	seq, err := strconv.Atoi(seqText)
	if err != nil || seq < 0 {
		return Message{}, fmt.Errorf("malformed pydevd line %.80q: bad sequence number", line)
	}
	return Message{ID: id, Seq: seq, Payload: payload}, nil
}

// ReadMessage reads the next line from br, skipping empty lines.
func ReadMessage(br *bufio.Reader, max int) (Message, error) {
	for {
		var line []byte
		for {
			chunk, err := br.ReadSlice('\n')
			line = append(line, chunk...)
			if len(line) > max {
				return Message{}, ErrLineTooLong
			}
			if err == nil {
				break
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				if len(line) > 0 && errors.Is(err, io.EOF) {
					return Message{}, fmt.Errorf("truncated pydevd line: %w", io.ErrUnexpectedEOF)
				}
				return Message{}, err
			}
		}
		text := strings.TrimRight(string(line), "\r\n")
		if text == "" {
			continue
		}
		return ParseLine(text)
	}
}

// pydevd quotes each outgoing payload with Python's urllib.parse.quote and
// these extra safe characters (pydevd_comm.NetCommand).
const (
	payloadSafe = `/<>_=" ` + "\t"
	// thread names inside the XML are quoted once more, with quote's
	// default safe "/" (NetCommandFactory._thread_to_xml).
	nameSafe = "/"
)

// PyQuote is Python's urllib.parse.quote(s, safe): UTF-8 bytes other than
// ASCII letters, digits, "_.-~" and safe become %XX.
func PyQuote(s, safe string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("_.-~", c) >= 0 || (c < 0x80 && strings.IndexByte(safe, c) >= 0) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// PyUnquote is Python's urllib.parse.unquote: %XX sequences become bytes,
// anything else (a lone %, bad hex) stays as it is; "+" is not a space.
func PyUnquote(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b = append(b, byte(v))
				i += 2
				continue
			}
		}
		b = append(b, s[i])
	}
	return string(b)
}

// threadIDRE matches pydevd's thread ids.
var threadIDRE = regexp.MustCompile(`^pid_(\d+)_id_\d+$`)

// ThreadPID returns the process id inside a pydevd thread id.
func ThreadPID(id string) (int64, bool) {
	m := threadIDRE.FindStringSubmatch(id)
	if m == nil {
		return 0, false
	}
	pid, err := strconv.ParseInt(m[1], 10, 64)
	return pid, err == nil
}

// RoutedThread finds the thread a command from PyCharm is about: the first
// tab-separated field that is a pydevd thread id (GET_ARRAY has it sixth,
// most commands first). "*" as the whole payload means every thread.
func RoutedThread(payload string) (thread string, all bool) {
	if strings.TrimSpace(payload) == "*" {
		return "", true
	}
	for i, f := range strings.Split(payload, "\t") {
		if i > 8 {
			break
		}
		if strings.HasPrefix(f, "__frame__:") {
			// a custom frame: "__frame__:<id>|<thread id>"
			if _, t, ok := strings.Cut(f, "|"); ok {
				f = t
			}
		}
		if _, ok := ThreadPID(f); ok {
			return f, false
		}
	}
	return "", false
}

// Breakpoint commands from PyCharm. SET_BREAK has two layouts in pydevd:
// by line (type, file, line, …) and, after CMD_VERSION asked for "ID",
// by id (id, type, file, line, …). REMOVE_BREAK is always type, file, id.

// breakFileField returns the index of the file field of a breakpoint
// command, or -1.
func breakFileField(id int, fields []string) int {
	switch id {
	case CmdSetBreak:
		if _, err := strconv.Atoi(fields[0]); err == nil && len(fields) > 3 {
			return 2 // id, type, file, line, …
		}
		if len(fields) > 2 {
			return 1 // type, file, line, …
		}
	case CmdRemoveBreak:
		if len(fields) > 2 {
			return 1
		}
	}
	return -1
}

// BreakpointKey names the breakpoint a SET_BREAK or REMOVE_BREAK is about
// (type, local file, id or line) and returns its file; ok is false for a
// payload that is neither.
func BreakpointKey(m Message) (key, file string, ok bool) {
	f := strings.Split(m.Payload, "\t")
	i := breakFileField(m.ID, f)
	if i < 0 {
		return "", "", false
	}
	typ, idOrLine := f[i-1], f[i+1]
	if m.ID == CmdSetBreak && i == 2 {
		idOrLine = f[0]
	}
	return typ + "\t" + f[i] + "\t" + idOrLine, f[i], true
}

// WithBreakpointFile returns m with its file field replaced.
func WithBreakpointFile(m Message, file string) Message {
	f := strings.Split(m.Payload, "\t")
	i := breakFileField(m.ID, f)
	if i < 0 {
		return m
	}
	f[i] = file
	m.Payload = strings.Join(f, "\t")
	return m
}

// WithAnyFunction returns a SET_BREAK with its function field set to None.
// PyCharm names the function enclosing the line (for a lambda, the function
// around it, e.g. main) and pydevd skips frames of any other function
// ('<lambda>' counts as ”), so a breakpoint in a lambda or nested function
// shipped from the driver would never fire on an executor. The line alone
// decides.
func WithAnyFunction(m Message) Message {
	if m.ID != CmdSetBreak {
		return m
	}
	f := strings.Split(m.Payload, "\t")
	i := breakFileField(m.ID, f)
	if i < 0 || i+2 >= len(f) {
		return m
	}
	f[i+2] = "None"
	m.Payload = strings.Join(f, "\t")
	return m
}

// XML attribute values in pydevd's payloads are escaped by
// pydevd_xml.make_valid_xml_value: & < > and ".
var (
	xmlUnescaper = strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&quot;", `"`, "&apos;", "'")
	xmlEscaper   = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
)

var (
	frameFileRE  = regexp.MustCompile(`(<frame\s[^>]*?\bfile=")([^"]*)(")`)
	threadNameRE = regexp.MustCompile(`(<thread\s[^>]*?\bname=")([^"]*)(")`)
)

// RewriteFrameFiles applies f to the file of every <frame> in a payload as
// pydevd sent it (quoted). It returns the payload unchanged, byte for byte,
// when there is nothing to rewrite or f changes nothing.
func RewriteFrameFiles(quoted string, f func(remote string) string) string {
	if !strings.Contains(quoted, "file=") {
		return quoted
	}
	text := PyUnquote(quoted)
	changed := false
	out := frameFileRE.ReplaceAllStringFunc(text, func(attr string) string {
		m := frameFileRE.FindStringSubmatch(attr)
		remote := xmlUnescaper.Replace(m[2])
		local := f(remote)
		if local == remote {
			return attr
		}
		changed = true
		return m[1] + xmlEscaper.Replace(local) + m[3]
	})
	if !changed {
		return quoted
	}
	return PyQuote(out, payloadSafe)
}

// frameElemRE is one <frame …>…</frame> element of a thread's stack as
// pydevd writes it (make_thread_stack_str), its file attribute captured.
var frameElemRE = regexp.MustCompile(`(?s)<frame\s[^>]*?\bfile="([^"]*)"[^>]*>.*?</frame>`)

// DropPlumbingFrames removes from a payload as pydevd sent it (quoted) the
// frames of the files that run every worker before the user's code
// (admission.IsPlumbingFile: the wrapper, PySpark's daemon). PyCharm has no
// way to show a frame as a library frame, so under every stop it listed
// remote_debug.py's frames as if they were the user's. A stack that would
// be left empty keeps its frames: a stop inside the wrapper itself shows
// where it is. The payload is returned byte for byte when nothing goes.
func DropPlumbingFrames(quoted string) string {
	if !strings.Contains(quoted, "frame") {
		return quoted
	}
	text := PyUnquote(quoted)
	frames := frameElemRE.FindAllStringSubmatchIndex(text, -1)
	plumbing := 0
	for _, f := range frames {
		if admission.IsPlumbingFile(xmlUnescaper.Replace(text[f[2]:f[3]])) {
			plumbing++
		}
	}
	if plumbing == 0 || plumbing == len(frames) {
		return quoted
	}
	var b strings.Builder
	last := 0
	for _, f := range frames {
		if admission.IsPlumbingFile(xmlUnescaper.Replace(text[f[2]:f[3]])) {
			b.WriteString(text[last:f[0]])
			last = f[1]
		}
	}
	b.WriteString(text[last:])
	return PyQuote(b.String(), payloadSafe)
}

// PrefixThreadNames prefixes the name of every <thread> in a payload as
// pydevd sent it (quoted) with prefix.
func PrefixThreadNames(quoted, prefix string) string {
	if prefix == "" || !strings.Contains(quoted, "name=") {
		return quoted
	}
	text := PyUnquote(quoted)
	changed := false
	out := threadNameRE.ReplaceAllStringFunc(text, func(attr string) string {
		m := threadNameRE.FindStringSubmatch(attr)
		name := PyUnquote(xmlUnescaper.Replace(m[2]))
		if strings.HasPrefix(name, prefix) {
			return attr
		}
		changed = true
		return m[1] + xmlEscaper.Replace(PyQuote(prefix+name, nameSafe)) + m[3]
	})
	if !changed {
		return quoted
	}
	return PyQuote(out, payloadSafe)
}

var (
	threadTagRE = regexp.MustCompile(`<thread\s[^>]*>`)
	idAttrRE    = regexp.MustCompile(`\bid="([^"]*)"`)
	nameAttrRE  = regexp.MustCompile(`\bname="([^"]*)"`)
)

// ThreadRef is a <thread> element's id and name, as PyCharm reads them.
type ThreadRef struct{ ID, Name string }

// ThreadList lists the <thread> elements of a quoted payload with their
// names unescaped and unquoted (pydevd quotes a name inside the XML).
func ThreadList(quoted string) []ThreadRef {
	var out []ThreadRef
	for _, tag := range threadTagRE.FindAllString(PyUnquote(quoted), -1) {
		var t ThreadRef
		if m := idAttrRE.FindStringSubmatch(tag); m != nil {
			t.ID = xmlUnescaper.Replace(m[1])
		}
		if m := nameAttrRE.FindStringSubmatch(tag); m != nil {
			t.Name = PyUnquote(xmlUnescaper.Replace(m[1]))
		}
		out = append(out, t)
	}
	return out
}

// ThreadCreatePayload is CMD_THREAD_CREATE's payload for one thread, as
// pydevd quotes it.
func ThreadCreatePayload(id, name string) string {
	return PyQuote(`<xml><thread name="`+xmlEscaper.Replace(PyQuote(name, nameSafe))+`" id="`+xmlEscaper.Replace(id)+`" /></xml>`, payloadSafe)
}

var threadIDAttrRE = regexp.MustCompile(`<thread\s[^>]*?\bid="(pid_\d+_id_\d+)"`)

// ThreadIDs lists the thread ids of the <thread> elements in a quoted
// payload (CMD_THREAD_CREATE, the CMD_LIST_THREADS answer, suspends).
func ThreadIDs(quoted string) []string {
	var out []string
	for _, m := range threadIDAttrRE.FindAllStringSubmatch(PyUnquote(quoted), -1) {
		out = append(out, m[1])
	}
	return out
}

// ErrorMessage is the CMD_ERROR answer to PyCharm's request seq.
func ErrorMessage(seq int, text string) Message {
	return Message{ID: CmdError, Seq: seq, Payload: PyQuote(text, payloadSafe)}
}
