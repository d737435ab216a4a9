//go:build linux && race

package integration

// raceEnabled makes the harness build sparkdap with -race too, so that a
// data race in the proxy fails the end-to-end test that provoked it.
const raceEnabled = true
