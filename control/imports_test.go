package control

import (
	"testing"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestNoFrontEndImport: both front ends (dap, pycharm) implement Backend,
// and cmd/sparkdap's client speaks the protocol without either.
func TestNoFrontEndImport(t *testing.T) {
	testenv.NoImports(t, "github.com/sparkdap/sparkdap/dap", "github.com/sparkdap/sparkdap/pycharm")
}
