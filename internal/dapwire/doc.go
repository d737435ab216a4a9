// Package dapwire is the Debug Adapter Protocol on the wire, apart from
// what any one program does with it: Content-Length framing and DAP
// messages as generic JSON. The proxy (package dap), the fake pydevd and
// the benchmarks' clients all read and write frames through it, so that
// the framing rules and their limits live in one place.
//
// A FrameReader is built for bytes from an untrusted peer: every body has
// a limit, a lower one until the peer is admitted, and a body's buffer
// grows only as its bytes arrive, so what a peer declares costs nothing
// until it is sent. AppendFrame is the one way a frame is written: the
// header's length is computed from the body, which may be given in pieces
// so that a sender copies each piece once, straight into the frame.
//
// A Message is a decoded object kept as generic JSON (maps, slices,
// json.Number), so that a relay forwards fields it does not know intact.
// It is decoded and encoded as encoding/json would decode and marshal it,
// but on jsontext's tokens (github.com/go-json-experiment/json) rather than
// by reflection; differential tests and fuzz targets hold the two equal.
//
// Output events are the exception to decoding everything: DecodeOutputEvent
// keeps an output event's text as a QuotedString, the JSON string as the
// peer sent it, validated but not unescaped, which a relay labels line by
// line and writes out (AppendObject) without decoding or quoting it again.
package dapwire
