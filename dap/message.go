package dap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/sparkdap/sparkdap/internal/dapwire"
)

// Message is a DAP message as generic JSON (dapwire.Message): the proxy
// builds, translates and forwards it as such.
type Message = dapwire.Message

// toInt reads a JSON number as an integer (dapwire.Int).
func toInt(v any) (int64, bool) { return dapwire.Int(v) }

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
