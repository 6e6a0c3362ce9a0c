// Package lookup is the CPU Engram lookup core: it copies the table rows
// named by a [T,K] array of int32 or int64 ids into a [T,K] array of R-byte
// output rows, through the fixed-row gather loops of package
// bufferpool/pack.
//
// A lookup has one [Column] per id column k: the table its ids index (a
// byte slice of NumRows rows of R bytes) and an offset subtracted from each
// id, so that global ids address a table-local row. Several columns may
// name the same table, with the same or different offsets. Id (t, k) is
// ids[t*K+k]; it is copied from row ids[t*K+k]-cols[k].Offset of column
// k's table to output row (t, k) of an [Output], at Off + t*TStride +
// k*KStride in the output buffer:
//
//	token-major [T,K,R] (TokenMajor):  | t0k0 | t0k1 | ... | t0kK-1 | t1k0 | ...
//	head-major  [K,T,R] (HeadMajor):   | t0k0 | t1k0 | ... | tT-1k0 | t0k1 | ...
//
// and any other strides under which no two output rows overlap (padded,
// tiled, interleaved). The id -1 leaves its output row untouched; every
// other id must name a row of its column's table, or the whole lookup fails
// before any byte is written ([Check] lists every rule and its error).
//
// [Lookup] is synchronous. It groups the columns that read one table with
// one offset and turns each group into as few pack gathers as the output
// layout allows: all columns of one table into a dense token-major output
// are a single gather of T*K rows, exactly the pack-only gather. Large
// lookups split over the goroutines of an [Engine]; steady-state lookups
// allocate nothing.
//
// # One check
//
// This package also holds the one check of every Engram lookup, local or
// remote. A [Request] is a lookup as the caller gives it (table names,
// offsets, ids, shape, output); [Request.Check] resolves its names through
// [Tables] (a local store's mapped rows, or a remote owner's tables and
// the arena its output must lie in), validates all of it and returns a
// [Checked], which the local path ([Engine.Run]) or the remote path (the
// remote client's Run) executes without checking again. Its errors are
// the Engram store's one vocabulary: the sentinels and typed errors of
// errors.go, which package engram exports under the same names, every
// message starting with the user-facing prefix "engram:".
package lookup
