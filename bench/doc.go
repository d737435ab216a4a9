// Package bench measures what sparkdap's proxy costs against the
// alternatives, side by side in one run: request latency (direct to pydevd,
// through sparkdap, through debugpy's own adapter), breakpoint fan-out,
// memory per idle executor session, output throughput (direct, through the
// yamux/SSH tunnel and through an OpenSSH forward) and the worker wrapper's
// overhead on a PySpark job. cmd/sparkdap-bench runs it all and prints a
// Markdown report; scripts/bench is the entry point. Timings are never
// asserted: the machines this runs on are shared and noisy, which is why
// every comparison is interleaved within one run and reported as a ratio.
package bench
