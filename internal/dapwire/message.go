package dapwire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Message is one decoded DAP message kept as generic JSON, so that fields a
// relay does not know survive a round trip. Numbers stay json.Number to keep
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

func (m Message) int(key string) (int64, bool) { return Int(m[key]) }

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

// Int reads a JSON number (json.Number, float64 or int) as an integer.
func Int(v any) (int64, bool) {
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
