//go:build race

package dap

// raceEnabled: the race detector slows the proxy several times over;
// tests that measure a flood send less.
const raceEnabled = true
