package main

import (
	"context"
	"os"
	"testing"
)

// TestMain keeps the commands' tests off pip and the network: they ship
// no debugger unless a test installs a wheelSource of its own.
func TestMain(m *testing.M) {
	wheelSource = func(context.Context) (string, error) { return "", nil }
	os.Exit(m.Run())
}
