package control

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestNoServer: Call's error says no serve listens both when there is no
// socket and when a dead serve left its socket; any other error does not.
func TestNoServer(t *testing.T) {
	dir := testenv.SocketDir(t)
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "stale.sock")
	testenv.StaleSocket(t, stale)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, path := range map[string]string{"no socket": filepath.Join(dir, "none.sock"), "stale socket": stale} {
		_, err := Call(ctx, path, Request{Op: OpKnownWorkers})
		if err == nil || !NoServer(err) {
			t.Errorf("%s: Call error %v, want one NoServer reports", name, err)
		}
	}
	if NoServer(errors.New("some other failure")) || NoServer(&Error{Code: "x", Message: "refused"}) {
		t.Error("NoServer holds for an error that is not about the socket")
	}
}
