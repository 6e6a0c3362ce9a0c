// Package packgen renders the fixed-row-size gather and scatter loops of
// package github.com/scatterkit/scatterkit/bufferpool/pack (the file
// pack_gen.go) with github.com/dave/jennifer.
//
// The generated file holds, for every specialized row size, id width (int32,
// int64), direction (gather: table rows to packed rows; scatter: packed rows
// to table rows) and layout (contiguous: packed rows back to back and ids
// dense; strided: any packed row stride and id stride), one loop with no
// bounds checks and no per-row calls; the any-size loops used for every other
// row size; and the dispatch that picks a loop from a task's row size, id
// width and layout. The loops rely on package pack having validated the task
// first; they are not safe on their own.
//
// How a row is moved is chosen per size, from measurements on the
// development machine (random 256 MiB table, one goroutine):
//
//   - [Inline] assigns a struct holding a [R]byte array. The compiler knows
//     the two sides cannot partially overlap and emits straight-line or
//     looped 16-byte vector moves inline. It beat runtime.memmove by 10-100%
//     for R of 64, 128 and 264 bytes.
//   - [Memmove] assigns a [R]byte array. Arrays may partially overlap, so the
//     compiler calls runtime.memmove with a constant size. For R of 512 and
//     more the inline 16-byte loop was 20-40% slower than memmove (measured
//     with the paired benchmark BenchmarkGatherPair, which alternates the two
//     loops), whose wide loads keep more cache misses in flight.
//
// Package pack carries the //go:generate line that runs cmd/packgen; a test
// in this package fails when the committed pack_gen.go differs from what
// [Render] produces.
package packgen
