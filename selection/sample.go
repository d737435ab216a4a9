package selection

import (
	"fmt"
	"hash/crc32"
)

// sampled is the worker's sampling (task._selected): a (stage, partition)
// pair is in the sample when the CRC-32 of "stage:partition" over 2^32 is
// below rate, so a retried attempt is sampled again and every run picks
// the same pairs.
func sampled(stage, partition int64, rate float64) bool {
	key := fmt.Sprintf("%d:%d", stage, partition)
	return float64(crc32.ChecksumIEEE([]byte(key)))/4294967296.0 < rate
}
