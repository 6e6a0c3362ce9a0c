package cudagather

import (
	"context"
	"fmt"
	"time"
)

// HostLookupConfig describes a HostLookup: the shape of its lookups and
// the host function that fetches their rows.
type HostLookupConfig struct {
	// T, K and RowBytes are the shape of every lookup of it: [T,K] ids,
	// rows of RowBytes bytes. IDs64 says the ids are int64 (else int32).
	T, K, RowBytes int
	IDs64          bool
	// Rows, when set, is the host staging the fetch writes into: T*K*
	// RowBytes bytes of pinned host memory (Context.PinHost, or memory
	// the caller registered otherwise, such as a remote Engram store's
	// buffer memory pinned with PinBuffers) that stays valid until Close.
	// Nil: the host lookup allocates pinned staging of its own.
	Rows []byte
	// Fetch runs on the host when the stream reaches the lookup (a host
	// node of a graph when captured): it gets the T*K ids the stream read
	// back (ids32 or ids64, by IDs64) and must write the row of every id
	// that is not -1 at rows[i*RowBytes:], i = t*K + k (rows of -1 ids
	// are never read). An error (or a panic, or running past Timeout)
	// writes no output row: the lookup's rows stay as they were, the
	// stream goes on and Context.Status reports a *HostLookupError. Fetch
	// runs on a goroutine of the context's proxy (or, where the driver
	// cannot capture stream memory operations, for a host function on a
	// thread of the driver, one at a time for the process's host
	// functions): it must not call CUDA, and must not wait for anything
	// that waits for a CUDA stream.
	Fetch func(ctx context.Context, ids32 []int32, ids64 []int64, rows []byte) error
	// Timeout bounds each fetch (its ctx's deadline; default
	// DefaultHostLookupTimeout). A fetch must return soon after ctx ends.
	Timeout time.Duration
}

// DefaultProxySpin is how long the host lookups' proxy keeps polling
// after the last request it served before it sleeps (Context.SetProxySpin).
const DefaultProxySpin = 2 * time.Millisecond

// DefaultHostLookupTimeout bounds a HostLookup's fetch when its config
// leaves Timeout zero.
const DefaultHostLookupTimeout = 10 * time.Second

// HostLookupError is a failed fetch of a HostLookup, reported by
// Context.Status: its output rows were left as they were.
type HostLookupError struct {
	// Err is what the fetch returned (context.DeadlineExceeded when it
	// ran past its timeout; a panic's value as an error).
	Err error
}

func (e *HostLookupError) Error() string {
	return fmt.Sprintf("cudagather: host lookup's fetch failed (its output rows were left as they were): %v", e.Err)
}

// Unwrap returns the fetch's error.
func (e *HostLookupError) Unwrap() error { return e.Err }

// check validates a config's shape and fills the defaults; it returns
// the id width and the staging's size.
func (cfg *HostLookupConfig) check() (idBytes, rowsBytes int64, err error) {
	bad := func(field, f string, a ...any) error { return &ArgError{Field: field, Reason: fmt.Sprintf(f, a...)} }
	switch {
	case cfg.T <= 0 || cfg.K <= 0:
		return 0, 0, bad("HostLookupConfig.T/K", "[%d,%d]: want both positive", cfg.T, cfg.K)
	case cfg.K > MaxColumns:
		return 0, 0, bad("HostLookupConfig.K", "%d columns, at most %d", cfg.K, MaxColumns)
	case cfg.RowBytes <= 0 || cfg.RowBytes > 1<<30:
		return 0, 0, bad("HostLookupConfig.RowBytes", "%d: want 1 to 2^30", cfg.RowBytes)
	case cfg.Fetch == nil:
		return 0, 0, bad("HostLookupConfig.Fetch", "nil")
	case cfg.Timeout < 0:
		return 0, 0, bad("HostLookupConfig.Timeout", "%v: negative", cfg.Timeout)
	}
	n, over := mul(int64(cfg.T), int64(cfg.K))
	if over || n > 1<<31-1 {
		return 0, 0, bad("HostLookupConfig.T/K", "[%d,%d]: more than 2^31-1 ids", cfg.T, cfg.K)
	}
	rowsBytes, over = mul(n, int64(cfg.RowBytes))
	if over || rowsBytes > 1<<40 {
		return 0, 0, bad("HostLookupConfig.RowBytes", "[%d,%d] rows of %d B: too large", cfg.T, cfg.K, cfg.RowBytes)
	}
	if cfg.Rows != nil && int64(len(cfg.Rows)) != rowsBytes {
		return 0, 0, bad("HostLookupConfig.Rows", "%d B for %d rows of %d B (want %d)", len(cfg.Rows), n, cfg.RowBytes, rowsBytes)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultHostLookupTimeout
	}
	idBytes = 4
	if cfg.IDs64 {
		idBytes = 8
	}
	return idBytes, rowsBytes, nil
}
