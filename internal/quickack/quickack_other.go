//go:build !linux

// Package quickack keeps a TCP connection from delaying its ACKs; see the
// Linux file. Elsewhere it is a no-op.
package quickack

import "net"

// Wrap returns c unchanged: TCP_QUICKACK is Linux-only.
func Wrap(c net.Conn) net.Conn { return c }
