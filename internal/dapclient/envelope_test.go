package dapclient

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

var envelopeFields = []string{"seq", "type", "command", "event", "request_seq", "success", "message", "body", "arguments"}

// sameAsUnmarshal checks DecodeEnvelope against json.Unmarshal, for
// messages whose keys name a field exactly or no field at all (json.Unmarshal
// also takes "Seq" for "seq"; no adapter writes that).
func sameAsUnmarshal(t *testing.T, in []byte) {
	t.Helper()
	var keys map[string]json.RawMessage
	if json.Unmarshal(in, &keys) != nil {
		keys = nil
	}
	for k := range keys {
		for _, f := range envelopeFields {
			if k != f && strings.EqualFold(k, f) {
				return
			}
		}
	}
	var want Envelope
	wantErr := json.Unmarshal(in, &want)
	got, err := DecodeEnvelope(in)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("DecodeEnvelope(%q) error %v, json.Unmarshal's %v", in, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeEnvelope(%q) = %+v, json.Unmarshal gives %+v", in, got, want)
	}
}

func TestDecodeEnvelope(t *testing.T) {
	for _, in := range []string{
		`{"seq":3,"type":"response","request_seq":2,"success":true,"command":"stackTrace","body":{"stackFrames":[]}}`,
		`{"seq":9,"type":"event","event":"output","body":{"category":"stdout","output":"a\nb é\u00e9"}}`,
		`{"seq":1,"type":"request","command":"startDebugging","arguments":{"request":"attach"}}`,
		`{"type":"response","success":false,"message":"no","request_seq":4,"command":"evaluate"}`,
		`{"seq":null,"type":"event","event":"x","body":null,"extra":[1,{"a":2}]}`,
		`{"event":"a","event":"b"}`,
		` {"type" : "event" , "seq" : 1 } `,
		`{"seq":"1"}`,
		`{"seq":1.5}`,
		`{"type":"event"} {}`,
		`{"type":"event"`,
		`[]`,
		`{"type":"ev\xffent"}`,
	} {
		sameAsUnmarshal(t, []byte(in))
	}
}

func FuzzDecodeEnvelope(f *testing.F) {
	f.Add([]byte(`{"seq":3,"type":"response","request_seq":2,"success":true,"command":"x","body":{"a":[1,"b"]}}`))
	f.Add([]byte(`{"seq":9,"type":"event","event":"output","body":{"output":"a\n\u00e9"},"arguments":null}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 4096 {
			return
		}
		sameAsUnmarshal(t, in)
	})
}

func TestDecodeOutput(t *testing.T) {
	for _, in := range []string{
		`{"category":"stdout","output":"a\nb \u00e9\n","source":{"path":"/x.py","x":[1,{}]},"line":3}`,
		`{"output":"only"}`,
		`{"source":{},"category":"console","output":"","group":"start"}`,
		`{"category":null,"output":"x","variablesReference":7}`,
	} {
		var want struct {
			Category string `json:"category"`
			Output   string `json:"output"`
		}
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		category, output, err := DecodeOutput(json.RawMessage(in))
		if err != nil || category != want.Category || output != want.Output {
			t.Errorf("DecodeOutput(%s) = %q, %q, %v; want %q, %q", in, category, output, err, want.Category, want.Output)
		}
	}
	if _, _, err := DecodeOutput(json.RawMessage(`[1]`)); err == nil {
		t.Error("DecodeOutput of an array: no error")
	}
}
