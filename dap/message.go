package dap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Message is one decoded DAP message kept as generic JSON, so that fields the
// proxy does not know survive a round trip. Numbers stay json.Number to keep
// their exact text.
type Message map[string]any

// DecodeMessage parses one DAP message body and checks the envelope fields
// every message must carry.
func DecodeMessage(body []byte) (Message, error) {
	obj, err := decodeObject(body)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	m := Message(obj)
	switch m.Type() {
	case "request":
		if m.Command() == "" {
			return nil, errors.New(`request without "command"`)
		}
	case "response":
		if m.Command() == "" {
			return nil, errors.New(`response without "command"`)
		}
		if _, ok := m.int("request_seq"); !ok {
			return nil, errors.New(`response without numeric "request_seq"`)
		}
	case "event":
		if m.Event() == "" {
			return nil, errors.New(`event without "event"`)
		}
	default:
		return nil, fmt.Errorf("unknown message type %q", m.Type())
	}
	return m, nil
}

// Encode renders the message as JSON.
func (m Message) Encode() ([]byte, error) { return appendJSON(nil, m) }

func (m Message) str(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m Message) int(key string) (int64, bool) { return toInt(m[key]) }

// Type is "request", "response" or "event".
func (m Message) Type() string { return m.str("type") }

// Command names a request or response.
func (m Message) Command() string { return m.str("command") }

// Event names an event.
func (m Message) Event() string { return m.str("event") }

// Seq is the sender's sequence number.
func (m Message) Seq() int64 { n, _ := m.int("seq"); return n }

// RequestSeq is the seq of the request a response answers.
func (m Message) RequestSeq() int64 { n, _ := m.int("request_seq"); return n }

// Success reports a response's outcome.
func (m Message) Success() bool { b, _ := m["success"].(bool); return b }

// Arguments returns a request's arguments, or nil.
func (m Message) Arguments() map[string]any { a, _ := m["arguments"].(map[string]any); return a }

// Body returns a response's or event's body, or nil.
func (m Message) Body() map[string]any { b, _ := m["body"].(map[string]any); return b }

// ErrorMessage is the reason a failed response gives.
func (m Message) ErrorMessage() string {
	if s := m.str("message"); s != "" {
		return s
	}
	if e, ok := m.Body()["error"].(map[string]any); ok {
		if f, ok := e["format"].(string); ok {
			return f
		}
	}
	return "request failed"
}

// toInt reads a JSON number (json.Number, float64 or int) as an integer.
func toInt(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := strconv.ParseInt(string(n), 10, 64)
		return i, err == nil
	case float64:
		return int64(n), float64(int64(n)) == n
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}

// toMap converts a go-dap (or any) struct into generic JSON so it can join a
// Message.
func toMap(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("dap: marshal %T: %v", v, err)) // only proxy-built values reach here
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		panic(fmt.Sprintf("dap: unmarshal %T: %v", v, err))
	}
	return m
}

// fromMap decodes generic JSON into a typed go-dap struct.
func fromMap(m map[string]any, v any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// deepCopy clones generic JSON, so one message can be sent to several peers
// and translated differently for each.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		c := make(map[string]any, len(t))
		for k, e := range t {
			c[k] = deepCopy(e)
		}
		return c
	case Message:
		return Message(deepCopy(map[string]any(t)).(map[string]any))
	case []any:
		c := make([]any, len(t))
		for i, e := range t {
			c[i] = deepCopy(e)
		}
		return c
	}
	return v
}

func newRequest(command string, args any) Message {
	m := Message{"type": "request", "command": command}
	if args != nil {
		m["arguments"] = args
	}
	return m
}

func newEvent(event string, body any) Message {
	m := Message{"type": "event", "event": event}
	if body != nil {
		m["body"] = body
	}
	return m
}

// newResponse answers req; body may be nil.
func newResponse(req Message, body any) Message {
	m := Message{"type": "response", "request_seq": json.Number(strconv.FormatInt(req.Seq(), 10)),
		"command": req.Command(), "success": true}
	if body != nil {
		m["body"] = body
	}
	return m
}

// newErrorResponse fails req with a message the IDE shows to the user.
func newErrorResponse(req Message, format string, args ...any) Message {
	msg := fmt.Sprintf(format, args...)
	return Message{"type": "response", "request_seq": json.Number(strconv.FormatInt(req.Seq(), 10)),
		"command": req.Command(), "success": false, "message": msg,
		"body": map[string]any{"error": map[string]any{"id": 1, "format": msg, "showUser": true}}}
}
