// Package regtab holds the region tables of the verbs backends: the
// Registry of a transport's registered regions (keys, pins, backend data)
// and the immutable Table of regions a connection serves or targets, both
// resolving (key, offset, length, access) to bytes with a per-batch Cursor
// so a run of requests naming one region costs one comparison each.
package regtab
