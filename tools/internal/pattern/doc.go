// Package pattern is the deterministic byte stream that scatterbench's
// owner fills its exported regions with and its requester checks
// destinations against, so both sides know every byte from a seed alone and
// no side has to hold a copy of the other's memory.
//
// The stream of a seed is a sequence of little-endian 64-bit words: word w
// (bytes 8w to 8w+7) is mix(seed, w), a SplitMix64 finalizer of the seed and
// the word index. Byte off of the stream is therefore computable on its own
// (At), any window of it can be filled or checked from its absolute offset
// (Fill, Check), and large fills split across goroutines (ParallelFill).
// Different seeds give unrelated streams; a window is all zero with
// negligible probability.
package pattern
