package testenv

import "testing"

// SkipIfShort ends the test under `go test -short`, saying why it is slow.
// It is the one gate scripts/test --quick relies on: every test that starts
// a JVM (Spark, YARN, Spark Connect), sshd, a trixie root or a real editor,
// or that takes more than a couple of seconds on a loaded 2-core machine,
// calls it first, so -short runs only tests that finish in about a second.
func SkipIfShort(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("skipping in -short mode: %s", why)
	}
}
