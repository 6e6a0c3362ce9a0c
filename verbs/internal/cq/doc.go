// Package cq is the completion queue shared by the verbs backends: a
// fixed ring of completions with credit accounting (a credit is one queue
// slot: taken by Post, returned by Poll), batched publication and waiting
// without per-completion channel sends or allocations.
package cq
