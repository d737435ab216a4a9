// Package tunnel carries executors' debugpy connections from an SSH gateway
// back to the proxy on the developer's laptop, for clusters whose executors
// cannot reach the laptop but can reach an edge node the laptop can SSH to.
//
// Design. The laptop dials the gateway with x/crypto/ssh (keys from
// ssh-agent, -i files or the ~/.ssh defaults; host keys checked against
// known_hosts, never skipped; AES-GCM preferred as the fastest cipher
// x/crypto has) and keeps it alive with keepalive@openssh.com requests. In
// agent mode (the default) it runs `sparkdap agent` on the gateway over one
// SSH session: the agent listens for executors on the gateway and opens one
// yamux stream per executor connection over the session's stdio, and the
// laptop hands each stream to a callback (dap.Hub.ServeExecutor) as a
// net.Conn. The agent writes each stream's source first (a small versioned
// header: the address the executor connected from), and the laptop reports
// it as the stream's RemoteAddr, so the proxy's per-source limits, hello
// keys and logs see the executor rather than the tunnel. One SSH channel
// then carries thousands of debuggees, yamux's per-stream window keeps one
// chatty debuggee from starving the others, the agent re-arms TCP_QUICKACK
// on pydevd's socket (pydevd's header/body writes otherwise cost ~40 ms per
// message) and its copy loops borrow pooled buffers only while bytes are
// moving. If the gateway has no sparkdap, the laptop uploads its own
// executable (same GOOS/GOARCH, found with uname) into a per-user cache
// keyed by SHA-256, verified remotely. Forward mode is for gateways where
// running a binary is not allowed: a plain tcpip-forward (ssh -R), one SSH
// channel per connection, at the cost of pydevd's 40 ms per message since
// its socket ends at sshd (which reports each connection's origin, the
// channel's RemoteAddr). When the SSH connection is lost, every stream on it
// ends (debuggees see EOF and run on undebugged, other proxy sessions are
// untouched) and Run reconnects with bounded exponential backoff; the new
// agent retries its port while the old one, which notices through yamux
// keepalives, exits.
package tunnel
