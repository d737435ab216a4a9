package dapwire

import (
	"strings"
	"testing"
)

func TestDecodeMessage(t *testing.T) {
	tests := []struct {
		name, in, wantErr string
	}{
		{"request", `{"seq":1,"type":"request","command":"threads"}`, ""},
		{"response", `{"seq":1,"type":"response","command":"threads","request_seq":3,"success":true}`, ""},
		{"event", `{"seq":1,"type":"event","event":"stopped"}`, ""},
		{"not JSON", `{`, "invalid JSON"},
		{"array", `[]`, "invalid JSON"},
		{"null", `null`, "not a JSON object"},
		{"unknown type", `{"type":"nope"}`, "unknown message type"},
		{"request without command", `{"type":"request"}`, "without \"command\""},
		{"response without request_seq", `{"type":"response","command":"x"}`, "request_seq"},
		{"event without name", `{"type":"event"}`, "without \"event\""},
		{"trailing data", `{"type":"event","event":"x"} {}`, "trailing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeMessage([]byte(tt.in))
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
