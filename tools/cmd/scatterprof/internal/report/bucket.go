package report

import "math/bits"

// Histogram geometry, shared with the kernel programs (package probe
// computes the same index in BPF): a log2 histogram with four linear
// sub-buckets per power of two.
//
//	ns < 4:   bucket ns (one nanosecond wide)
//	ns >= 4:  bucket 4*lg + ((ns >> (lg-2)) & 3), lg = floor(log2(ns))
//
// Buckets 4..7 stay empty; bucket 255 ends at 2^64 ns. The log2 bucket of
// bucket i is i/4 (for i >= 8).
const (
	// Buckets is the number of buckets per stage.
	Buckets = 256
	// SubBuckets is the number of linear sub-buckets per power of two.
	SubBuckets = 4
	// MaxStages bounds the stage numbers the profiler records (0..15).
	// Stage 15 is reserved for the profiler's own calibration.
	MaxStages = 16
	// CalibrationStage is the stage number the calibration loop uses; the
	// engine never emits it.
	CalibrationStage = MaxStages - 1
)

// BucketOf returns the bucket of a duration in nanoseconds.
func BucketOf(ns uint64) int {
	if ns < 4 {
		return int(ns)
	}
	lg := bits.Len64(ns) - 1
	return lg*SubBuckets + int(ns>>(lg-2)&3)
}

// Log2Bucket returns floor(log2(ns)) for ns >= 1 (0 for 0): the plain log2
// bucket a duration falls in.
func Log2Bucket(ns uint64) int {
	if ns == 0 {
		return 0
	}
	return bits.Len64(ns) - 1
}

// Lower returns the smallest duration, in nanoseconds, of bucket i.
func Lower(i int) uint64 {
	if i < 8 {
		if i < 4 {
			return uint64(i)
		}
		return 4 // unused buckets 4..7 collapse onto bucket 8's start
	}
	lg, sub := i/SubBuckets, uint64(i%SubBuckets)
	return (SubBuckets + sub) << (lg - 2)
}

// Upper returns the end (exclusive) of bucket i in nanoseconds; for the
// last bucket it saturates at the largest uint64.
func Upper(i int) uint64 {
	if i < 4 {
		return uint64(i) + 1
	}
	if i < 8 {
		return 4
	}
	if i == Buckets-1 {
		return ^uint64(0)
	}
	lg := i / SubBuckets
	return Lower(i) + 1<<(lg-2)
}
