package dapclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// lenient reads JSON as json.Unmarshal does: the last of a repeated key,
// and invalid UTF-8 as U+FFFD.
var lenient = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// DecodeEnvelope decodes one DAP message as json.Unmarshal into an
// Envelope would, for what an adapter sends: its fields by their exact
// names, the last of a repeated one, others skipped, and the body and
// arguments as they are. It reads the message once, with jsontext, where
// json.Unmarshal reads it twice and unescapes what it skips: a client
// that follows a task's output should cost what an IDE's JSON parser
// costs, not several times the proxy's CPU.
func DecodeEnvelope(content []byte) (Envelope, error) {
	var m Envelope
	d := jsontext.NewDecoder(bytes.NewReader(content), lenient...)
	if t, err := d.ReadToken(); err != nil || t.Kind() != '{' {
		return m, errors.New("not a JSON object")
	}
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return m, err
		}
		name := tok.String() // before the next read, which voids tok
		v, err := d.ReadValue()
		if err != nil {
			return m, err
		}
		var target any
		switch name {
		case "seq":
			target = &m.Seq
		case "type":
			target = &m.Type
		case "command":
			target = &m.Command
		case "event":
			target = &m.Event
		case "request_seq":
			target = &m.RequestSeq
		case "success":
			target = &m.Success
		case "message":
			target = &m.Message
		case "body":
			m.Body = append(json.RawMessage(nil), v...)
			continue
		case "arguments":
			m.Arguments = append(json.RawMessage(nil), v...)
			continue
		default:
			continue
		}
		if v.Kind() == 'n' {
			continue // null leaves a field as it is, as with json.Unmarshal
		}
		if err := json.Unmarshal(v, target); err != nil {
			return m, fmt.Errorf("field %q: %w", name, err)
		}
	}
	if _, err := d.ReadToken(); err != nil {
		return m, err
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return m, errors.New("data after the JSON object")
	}
	return m, nil
}

// DecodeOutput decodes an output event's body to its category and text,
// in one read as DecodeEnvelope does: what follows a task's output reads
// tens of megabytes of it.
func DecodeOutput(body json.RawMessage) (category, output string, err error) {
	d := jsontext.NewDecoder(bytes.NewReader(body), lenient...)
	if t, err := d.ReadToken(); err != nil || t.Kind() != '{' {
		return "", "", errors.New("output body is not a JSON object")
	}
	for d.PeekKind() != '}' {
		tok, err := d.ReadToken()
		if err != nil {
			return "", "", err
		}
		name := tok.String()
		if k := d.PeekKind(); k == '{' || k == '[' {
			if err := d.SkipValue(); err != nil {
				return "", "", err
			}
			continue
		}
		v, err := d.ReadToken()
		if err != nil {
			return "", "", err
		}
		switch {
		case name == "category" && v.Kind() == '"':
			category = v.String()
		case name == "output" && v.Kind() == '"':
			output = v.String()
		}
	}
	return category, output, nil
}
