// Package dapclient is a small Debug Adapter Protocol client: the IDE side
// of a DAP session, for tests, benchmarks and the demo, and for the CLI's
// doctor and paths commands, which send one request to a proxy. It sends
// requests and waits for their responses, keeps every event in an ordered
// log so a test can wait for one without racing the adapter, and answers
// reverse requests (startDebugging, runInTerminal) through a hook. It can
// follow startDebugging into child sessions the way VS Code does.
//
// Messages are kept as raw JSON, so commands and events go-dap has no types
// for (pydevdAuthorize, debugpyAttach, ...) pass through unchanged; bodies
// decode into go-dap's typed structs on demand. Frames are read with
// dapwire's FrameReader, so what one frame can make the client hold is
// bounded whoever the peer is (a 4 KiB header, a body of at most
// dapwire.DefaultMaxMessageBytes, buffered only as it arrives). What the
// connection as a whole can make it hold is not: the event log and the
// reverse-request handlers grow with what the peer sends for as long as
// the connection is open. The CLI therefore keeps each connection to one
// request under a deadline (doctor's probe of an unknown program on the
// IDE port 5 s, paths 10 s, doctor's other requests its check timeout),
// and a long-lived client belongs only in tests.
package dapclient
