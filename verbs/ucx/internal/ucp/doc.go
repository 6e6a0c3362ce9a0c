// Package ucp is the one place scatterkit touches UCX (the ucp API, built
// with the `ucx` tag and libucx-dev): a context with RMA, workers and
// their addresses, endpoints, memory registration with packed remote
// keys, and one-sided gets and puts polled to completion. Memory handed
// to it is addressed by pointer and length and must not move while UCX
// may use it (mmap'd regions, or pinned Go memory). Without the tag every
// constructor returns ErrNotSupported.
package ucp
