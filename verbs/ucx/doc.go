// Package ucx is to be the verbs backend over UCX (issue 19): one-sided
// READ and WRITE as UCX gets and puts, memory registered with ucp_mem_map
// and its packed remote keys exchanged in the segment handshake, worker
// progress on a dedicated locked thread. Built so far: with the `ucx`
// build tag, the funnel (internal/ucp, the only package that includes
// UCX's headers), the progress loop (loop.go) a connection's side runs
// its worker on, and the table of a peer's regions that resolves and
// checks each request before it is posted (remote.go: a one-sided
// operation is not seen by the peer's code); in every build, the
// attachment a side's handshake
// will carry (its worker address and a packed key per listed region,
// decoded strictly: UCX parses those blobs unvalidated). The Transport
// itself is not built yet.
package ucx
