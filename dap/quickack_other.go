//go:build !linux

package dap

import "net"

// withQuickAck is Linux-only; elsewhere delayed ACKs stay as they are.
func withQuickAck(c net.Conn) net.Conn { return c }
