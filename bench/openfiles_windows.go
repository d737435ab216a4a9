package bench

import "math"

// Windows has no limit on open sockets to raise: handles are bounded by
// memory alone.

func openFilesLimit() uint64 { return math.MaxUint64 }

func raiseOpenFiles(uint64) uint64 { return math.MaxUint64 }
