package dap

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// keyKinds names the fields that always carry an id of one kind, wherever
// they appear in a message.
var keyKinds = map[string]idKind{
	"threadId":           kindThread,
	"frameId":            kindFrame,
	"variablesReference": kindVariables,
	"sourceReference":    kindSource,
}

// listKinds names arrays whose elements' "id" field is an id of one kind.
var listKinds = map[string]idKind{
	"threads":     kindThread,
	"stackFrames": kindFrame,
}

// translator rewrites the ids in one message. toGlobal goes executor → IDE;
// otherwise IDE → executor, where every id must belong to one session.
type translator struct {
	table    *idTable
	session  uint64 // toGlobal: whose ids; toLocal: filled in by the first id seen
	toGlobal bool
	found    bool // toLocal: at least one id resolved
}

// errForeignID reports an id that no session owns, or that belongs to another
// session than the rest of the message.
type errForeignID struct {
	kind   idKind
	global int64
	reason string
}

func (e *errForeignID) Error() string {
	return fmt.Sprintf("%s %d %s", e.kind, e.global, e.reason)
}

// walk rewrites v in place and returns the (possibly replaced) value.
func (tr *translator) walk(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if kind, ok := keyKinds[k]; ok {
				n, err := tr.id(kind, e)
				if err != nil {
					return nil, err
				}
				t[k] = n
				continue
			}
			if kind, ok := listKinds[k]; ok {
				if arr, ok := e.([]any); ok {
					for _, item := range arr {
						if obj, ok := item.(map[string]any); ok {
							n, err := tr.id(kind, obj["id"])
							if err != nil {
								return nil, err
							}
							obj["id"] = n
							if _, err := tr.walk(obj); err != nil {
								return nil, err
							}
						}
					}
					continue
				}
			}
			n, err := tr.walk(e)
			if err != nil {
				return nil, err
			}
			t[k] = n
		}
		return t, nil
	case []any:
		for i, e := range t {
			n, err := tr.walk(e)
			if err != nil {
				return nil, err
			}
			t[i] = n
		}
		return t, nil
	}
	return v, nil
}

// id translates one id value. Zero means "none" for references and is kept;
// so are non-numeric values from the IDE such as threadId "*". From an
// executor, an id that is not an integer is an error: passed through
// untranslated, 1.0 or "1" could name another executor's thread in the IDE.
func (tr *translator) id(kind idKind, v any) (any, error) {
	n, ok := toInt(v)
	if !ok && tr.toGlobal && v != nil {
		return nil, fmt.Errorf("%s %v from the executor is not an integer", kind, truncate(fmt.Sprint(v), 32))
	}
	if !ok || n == 0 {
		return v, nil
	}
	if tr.toGlobal {
		g, err := tr.table.Global(kind, tr.session, n)
		if err != nil {
			return nil, err
		}
		return json.Number(strconv.FormatInt(g, 10)), nil
	}
	owner, ok := tr.table.Local(kind, n)
	if !ok {
		return nil, &errForeignID{kind, n, "is unknown or expired (its executor may have resumed or gone)"}
	}
	if tr.found && owner.session != tr.session {
		return nil, &errForeignID{kind, n, "belongs to another executor than the other ids in this request"}
	}
	tr.found, tr.session = true, owner.session
	return json.Number(strconv.FormatInt(owner.local, 10)), nil
}

// globalize rewrites session's local ids in v (a body) to global ones.
func (t *idTable) globalize(session uint64, v any) error {
	tr := &translator{table: t, session: session, toGlobal: true}
	_, err := tr.walk(v)
	return err
}

// localize rewrites global ids in v (a request's arguments) to local ones and
// reports the session that owns them; ok is false when v carries no id.
func (t *idTable) localize(v any) (session uint64, ok bool, err error) {
	tr := &translator{table: t}
	if _, err := tr.walk(v); err != nil {
		return 0, false, err
	}
	return tr.session, tr.found, nil
}
