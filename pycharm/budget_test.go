package pycharm_test

import (
	"bufio"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/internal/syncbuf"
	"github.com/sparkdap/sparkdap/pathmap"
	"github.com/sparkdap/sparkdap/pycharm"
	"github.com/sparkdap/sparkdap/testkit/pycharmtest"
)

// TestNoTokenPeerCannotLockOut: a peer without the token opens idle
// connections to the executor port as fast as it can. It holds its
// source's share of the port's budget and no more, so a worker from
// another host is still admitted; the flood's refusals log one warning,
// not one each.
func TestNoTokenPeerCannotLockOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ide, err := pycharmtest.Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ide.Close)
	var log syncbuf.Buffer
	const perSource, flood = 3, 40
	px, err := pycharm.Listen(pycharm.Config{Token: "tok", PyCharm: ide.Addr(), MaxUnadmitted: 8,
		MaxUnadmittedPerSource: perSource, RefusalLogInterval: time.Hour,
		Log: zerolog.New(&log).Level(zerolog.InfoLevel)}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go px.Serve(ctx)
	t.Cleanup(px.Close)
	addr := px.Addr().String()

	served := 0
	for range flood {
		c := dialFrom(t, "127.0.0.1", addr)
		t.Cleanup(func() { c.Close() })
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		// The proxy speaks first (its probe) to a connection it serves;
		// one over budget is closed unread.
		if _, err := pycharm.ReadMessage(bufio.NewReader(c), 1<<20); err == nil {
			served++
		} else if !strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("connection %d neither served nor closed: %v", served, err)
		}
	}
	if served != perSource {
		t.Errorf("the flood holds %d of the executor port's places, want its share %d", served, perSource)
	}

	go func() { _ = ide.Accept(ctx) }()
	nonce, reply := sayHelloFrom(t, "127.0.0.2", addr, 909, 0, pathmap.Roots{})
	if nonce == "" {
		t.Fatalf("a worker from another host was refused: %q", reply)
	}
	w := connectPydevdFrom(t, "127.0.0.2", addr, 909, nonce)
	if _, err := ide.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, pycharm.CmdRun)

	if warned := strings.Count(log.String(), "closing this one unread"); warned != 1 {
		t.Errorf("%d warnings for %d refused connections of one cause, want 1:\n%s", warned, flood-perSource, log.String())
	}
}
