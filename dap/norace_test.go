//go:build !race

package dap

// raceEnabled: see race_test.go.
const raceEnabled = false
