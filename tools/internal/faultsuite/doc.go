// Package faultsuite is the owner-hardening fault-injection suite: a test
// package (this file holds only its documentation) run by `go test work`.
//
// Between a requester and an owner in one process it puts a
// verbs/faultproxy proxy, and runs a matrix of cells. The rows are
// workloads over verbs/tcp:
//
//   - verbs-direct-read, verbs-direct-write, verbs-gather-read,
//     verbs-gather-write: one engine.Engine scatter operation (ModeDirect or
//     ModeGather forced) of a ranges plan of a few thousand fragments of
//     48-264 bytes and two or three of 128-512 KiB, against an owner with a
//     Segment, a gather.Service and bufferpool staging (and requester
//     staging, exposed, for WRITE gather);
//   - engram-lookup: a remote engram.Store lookup of a few thousand
//     264-byte rows from a Store.Serve owner (rows are one size, so this
//     row has no large fragments);
//   - structobj-put, structobj-get: a structobj.Client PUT of an object of
//     a few thousand small members and a few large ones, and a GET of every
//     member, against a structobj.Owner with a gather service.
//
// The columns are faults set on the proxy once the connection is up (see
// the columns table in the tests for the exact ranges): pass (the
// control), delay, stall shorter than the operation's deadline, stall
// longer than it (until healed), reset (RST of every lane after a random
// number of bytes), partition then heal, and corrupt (one byte flipped at
// a random offset of one direction's stream).
//
// # What a cell checks
//
// Each trial runs the operation under a context deadline (OpDeadline) with
// fresh random non-zero data from a logged seed, and its outcome must be
// one of:
//
//   - ok: the operation returned no error, and the destination bytes (the
//     requester's region for READ and GET, the owner's region, or the
//     object read back over a direct connection, for WRITE and PUT) equal
//     the expected bytes exactly;
//   - failed: the operation returned an error. A READ's destination is not
//     asserted then; a failed PUT must have left its key absent or holding
//     exactly the new object (visible whole or not at all).
//
// Anything else fails the test: "wrong" (no error but wrong bytes: reported
// as success) and "hang" (the operation did not return within OpDeadline
// plus Grace; a watchdog then fails the test with a goroutine dump, heals
// the proxy and resets its connections so the rest of the suite can run).
//
// After each cell's trials: the owner's staging (and the requester's) holds
// no lease once the service settles (polled for at most SettleWait;
// engram's and structobj's owners keep their staging private, so their
// Close, which reports leaked leases, must succeed), structobj holds and
// reservations left behind by broken connections are gone once their TTL
// passes, and the owner is healthy: a fresh connection straight to it (not
// through the proxy) completes a correct operation.
//
// The log has one line per trial, one line per cell
//
//	cell <workload>/<fault>: trials N, ok A, failed F (reasons: ...)
//
// and a summary table at the end. Flags: -faultsuite.seed reruns a seed,
// -faultsuite.trials sets the trials per cell (default 3; 2 with -short),
// -faultsuite.run selects cells by a regular expression over
// "<workload>/<fault>".
package faultsuite
