package pycharm_test

import (
	"testing"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestNoDAPImport: the PyCharm front end shares only the executor-side
// core (worker, pathmap, internal/wirequeue) with the DAP front end, never
// package dap itself, so a third front end can be added the same way.
func TestNoDAPImport(t *testing.T) {
	testenv.NoImports(t, "github.com/sparkdap/sparkdap/dap")
}
