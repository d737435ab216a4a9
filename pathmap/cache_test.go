package pathmap

import (
	"errors"
	"strings"
	"testing"
)

func TestCache(t *testing.T) {
	pm := NewForFiles("/home/me/proj", false, projectFiles, nil)
	c := NewCache(pm, Roots{SparkFiles: "/tmp/spark-1/userFiles-2"})

	remote := "/tmp/spark-1/userFiles-2/jobs/utils.py"
	r, fresh := c.ToLocal(remote)
	if r.Err != nil || r.Mapping.Local != "/home/me/proj/jobs/utils.py" || !fresh {
		t.Fatalf("ToLocal = %+v, fresh %v", r, fresh)
	}
	if _, fresh := c.ToLocal(remote); fresh {
		t.Error("a second lookup was computed again")
	}
	if got, ok := c.RemoteOf("/home/me/proj/jobs/utils.py"); !ok || got != remote {
		t.Errorf("RemoteOf = %q, %v", got, ok)
	}
	if r, _ := c.ToLocal("/elsewhere/utils.py"); !errors.Is(r.Err, ErrAmbiguous) {
		t.Errorf("ambiguous path: %v", r.Err)
	}
	mapped, unmapped := c.Outcomes()
	if len(mapped) != 1 || mapped[0].Remote != remote || len(unmapped) != 1 {
		t.Errorf("Outcomes = %+v, %q", mapped, unmapped)
	}

	cands := c.ToRemote("/home/me/proj/jobs/utils.py")
	if !contains(cands, remote) {
		t.Fatalf("candidates %q miss %s", cands, remote)
	}
	if c.SetRoots(c.Roots()) {
		t.Error("the same roots counted as new")
	}
	if !c.SetRoots(Roots{SparkFiles: "/tmp/spark-9/userFiles-3"}) {
		t.Fatal("new roots not taken")
	}
	if cands := c.ToRemote("/home/me/proj/jobs/utils.py"); !contains(cands, "/tmp/spark-9/userFiles-3/jobs/utils.py") || contains(cands, remote) {
		t.Errorf("candidates after new roots: %q", cands)
	}
	if _, fresh := c.ToLocal(remote); fresh {
		t.Error("new roots dropped the outcomes already reported")
	}
}

func TestCacheWithoutMapper(t *testing.T) {
	c := NewCache(nil, Roots{Cwd: "/w"})
	if got := c.ToRemote("/a/b.py"); len(got) != 1 || got[0] != "/a/b.py" {
		t.Errorf("ToRemote = %q", got)
	}
	if r, fresh := c.ToLocal("/a/b.py"); !errors.Is(r.Err, ErrUnmapped) || fresh {
		t.Errorf("ToLocal = %+v, %v", r, fresh)
	}
	if _, ok := c.RemoteOf("/a/b.py"); ok {
		t.Error("RemoteOf without a mapper")
	}
	if m, u := c.Outcomes(); len(m)+len(u) != 0 || m == nil || u == nil {
		t.Errorf("Outcomes = %v, %v", m, u)
	}
	if !c.SetRoots(Roots{Cwd: "/x"}) || c.Roots().Cwd != "/x" {
		t.Error("roots not kept without a mapper")
	}
}

func TestRuleErrorsNameNoFlag(t *testing.T) {
	for _, bad := range []string{"noequals", "/tmp/[unclosed=/x"} {
		_, err := ParseRule(bad)
		var re *RuleError
		if !errors.As(err, &re) || re.Rule != bad {
			t.Errorf("ParseRule(%q): %v is not a RuleError", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "--") {
			t.Errorf("error names a flag: %v", err)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
