// Package dapclient is a small Debug Adapter Protocol client for tests and
// benchmarks. It plays the IDE side of a DAP session: it sends requests and
// waits for their responses, keeps every event in an ordered log so a test
// can wait for one without racing the adapter, and answers reverse requests
// (startDebugging, runInTerminal) through a hook. It can follow
// startDebugging into child sessions the way VS Code does.
//
// Messages are framed with go-dap but kept as raw JSON, so commands and
// events go-dap has no types for (pydevdAuthorize, debugpyAttach, ...) pass
// through unchanged; bodies decode into go-dap's typed structs on demand.
// go-dap's framing rejects frames over 4 MiB, which is fine for tests but
// makes this package unsuitable for production traffic.
package dapclient
