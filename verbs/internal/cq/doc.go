// Package cq is the completion queue shared by the verbs backends: a
// fixed ring of completions with credit accounting (a credit is one queue
// slot: taken by Post, returned by Poll), batched publication and waiting
// without per-completion channel sends or allocations. A closed queue
// with nothing in flight can be reopened for a new epoch, so an owner
// reuses one queue for the Peers of many calls; the epoch-checked methods
// refuse a Peer kept from an earlier call.
package cq
