//go:build linux && !race

package integration

const raceEnabled = false
