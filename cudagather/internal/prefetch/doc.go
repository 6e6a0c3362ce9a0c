// Package prefetch asks the CPU to bring memory into its caches ahead of
// use (PREFETCHT0 on amd64; nothing elsewhere). It is apart from
// cudagather because a package that uses cgo cannot hold Go assembly.
package prefetch
