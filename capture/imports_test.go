package capture

import (
	"testing"

	"github.com/sparkdap/sparkdap/testkit/testenv"
)

// TestNoFrontEndImport: both front ends (dap, pycharm) use this package,
// which depends on neither, nor on the worker wrapper: its Python lives in
// capture/python.
func TestNoFrontEndImport(t *testing.T) {
	testenv.NoImports(t, "github.com/sparkdap/sparkdap/dap", "github.com/sparkdap/sparkdap/pycharm",
		"github.com/sparkdap/sparkdap/workerwrap", "github.com/sparkdap/sparkdap/workerwrap/python")
}
