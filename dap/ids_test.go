package dap

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sparkdap/sparkdap/internal/dapwire"
)

func TestIDTable(t *testing.T) {
	tab := newIDTable()
	a1, _ := tab.Global(kindFrame, 1, 7)
	b1, _ := tab.Global(kindFrame, 2, 7)
	if a1 == b1 {
		t.Fatalf("same local id in two sessions got one global id %d", a1)
	}
	if again, _ := tab.Global(kindFrame, 1, 7); again != a1 {
		t.Fatalf("second lookup of a known id allocated %d, want %d", again, a1)
	}
	if th, _ := tab.Global(kindThread, 1, 7); th == 0 {
		t.Fatal("thread id 0")
	}
	if o, ok := tab.Local(kindFrame, b1); !ok || o.session != 2 || o.local != 7 {
		t.Fatalf("Local(%d) = %+v, %v", b1, o, ok)
	}
	tab.Release(1, kindFrame)
	if _, ok := tab.Local(kindFrame, a1); ok {
		t.Fatal("released frame id still resolves")
	}
	if _, ok := tab.Local(kindFrame, b1); !ok {
		t.Fatal("releasing one session's frames dropped another's")
	}
	if tab.Len(kindThread) != 1 {
		t.Fatal("releasing frames dropped threads")
	}
	tab.Forget(1)
	tab.Forget(2)
	for k := range nKinds {
		if n := tab.Len(k); n != 0 {
			t.Errorf("%s: %d ids left after every session was forgotten", k, n)
		}
	}
	if len(tab.sessions) != 0 {
		t.Errorf("%d sessions left", len(tab.sessions))
	}
}

func TestIDTableWrapsAndSkipsLiveIDs(t *testing.T) {
	tab := newIDTable()
	live, _ := tab.Global(kindVariables, 1, 1) // global 1 stays in use
	tab.next[kindVariables] = maxGlobalID - 1
	g1, _ := tab.Global(kindVariables, 1, 2)
	g2, _ := tab.Global(kindVariables, 1, 3)
	if g1 != maxGlobalID || g2 == live || g2 != 2 {
		t.Fatalf("after wrap: %d, %d (live %d); want %d then 2", g1, g2, live, maxGlobalID)
	}
}

func TestTranslateBothWays(t *testing.T) {
	tab := newIDTable()
	parse := func(s string) map[string]any {
		m, err := dapwire.DecodeMessage([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	// Executor 1's stackTrace body: frame ids in "id", refs nested.
	body := parse(`{"type":"event","event":"x","threadId":1,"stackFrames":[{"id":2,"source":{"sourceReference":4}},{"id":3,"source":{"sourceReference":0}}],"variablesReference":0}`)
	if err := tab.globalize(1, body); err != nil {
		t.Fatal(err)
	}
	frames := body["stackFrames"].([]any)
	f0 := frames[0].(map[string]any)
	if n, _ := toInt(f0["source"].(map[string]any)["sourceReference"]); n == 0 {
		t.Error("sourceReference not translated")
	}
	if frames[1].(map[string]any)["source"].(map[string]any)["sourceReference"] != json.Number("0") {
		t.Error("sourceReference 0 (none) must stay 0")
	}
	// Back: a request naming that frame goes to session 1 with local id 2.
	args := map[string]any{"frameId": f0["id"], "expression": "x"}
	sess, ok, err := tab.localize(args)
	if err != nil || !ok || sess != 1 {
		t.Fatalf("localize: session %d ok %v err %v", sess, ok, err)
	}
	if n, _ := toInt(args["frameId"]); n != 2 {
		t.Fatalf("local frameId = %v, want 2", args["frameId"])
	}
	// Ids from two sessions in one request are refused.
	g2, _ := tab.Global(kindThread, 2, 1)
	mixed := map[string]any{"frameId": f0["id"], "threadId": json.Number(itoa(g2))}
	if _, _, err := tab.localize(mixed); err == nil || !strings.Contains(err.Error(), "another executor") {
		t.Fatalf("mixed ids: err = %v", err)
	}
	if _, _, err := tab.localize(map[string]any{"threadId": 999}); err == nil {
		t.Fatal("unknown id accepted")
	}
	if _, ok, err := tab.localize(map[string]any{"threadId": "*"}); ok || err != nil {
		t.Fatalf(`threadId "*" must pass untouched: ok %v err %v`, ok, err)
	}
}

// FuzzTranslate runs arbitrary JSON through both directions of the id
// translator: errors are fine, panics are not.
func FuzzTranslate(f *testing.F) {
	f.Add([]byte(`{"threadId":1,"stackFrames":[{"id":2}],"threads":[{"id":"x"}],"variablesReference":3.5}`))
	f.Add([]byte(`{"frameId":-1,"sourceReference":{"a":1},"threads":7}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		tab := newIDTable()
		_ = tab.globalize(1, v)
		_, _, _ = tab.localize(v)
	})
}
