// Command checkwheel checks sparkdap wheels: each carries one binary, at
// sparkdap/bin/sparkdap (sparkdap.exe on Windows), built for the platform
// its wheel tags name, as read from the binary's own file header (ELF,
// Mach-O or PE machine type), not from its name. It prints each wheel's
// platform, binary size and wheel size, and exits 1 if any is wrong.
//
//	go run ./packaging/checkwheel DIST_DIR/*.whl
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: checkwheel WHEEL...")
		os.Exit(2)
	}
	bad := 0
	for _, path := range os.Args[1:] {
		r, err := checkWheel(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "checkwheel: %v\n", err)
			bad++
			continue
		}
		fmt.Printf("%-74s %-14s binary %5.1f MiB, wheel %5.1f MiB\n", r.name, r.platform, mib(r.binarySize), mib(r.wheelSize))
	}
	if bad > 0 {
		os.Exit(1)
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
