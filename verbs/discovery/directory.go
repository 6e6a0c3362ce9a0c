package discovery

import (
	"context"
	"iter"
)

// Directory maps segment names to records. Every implementation is safe for
// concurrent use and follows the same contract, checked for each backend by
// the discoverytest suite.
type Directory interface {
	// Publish stores r under r.Name for as long as the returned Registration
	// is open and its owner lives. The record is checked with
	// PreparePublish; a name that a live owner holds is refused with an
	// *ExistsError (ErrExists), never taken over. A record that has expired
	// or whose owner died does not hold its name. On error nothing changed.
	Publish(ctx context.Context, r Record) (Registration, error)

	// Lookup returns the live record named name, or an error matching
	// ErrNotFound.
	Lookup(ctx context.Context, name string) (Record, error)

	// List returns the live records whose names start with prefix (a plain
	// string prefix, "" for all), sorted by name.
	List(ctx context.Context, prefix string) ([]Record, error)

	// Watch checks prefix and returns a sequence of the changes to the
	// records whose names start with it. Each iteration of the sequence is a
	// separate watch: it first reports every live record as EventPut, then
	// reports changes as they happen. Changes that follow each other quickly
	// may be merged (a record withdrawn and published again may show as one
	// EventPut with the new Revision), but the last state of every name is
	// always reported. The sequence ends after yielding a non-nil error:
	// ctx.Err() when ctx ends, ErrClosed when the directory closes, or a
	// backend error. Breaking out of the loop ends the watch and releases
	// everything it held.
	Watch(ctx context.Context, prefix string) (iter.Seq2[Event, error], error)

	// Close withdraws every registration made through this directory, ends
	// its watches and releases its resources. Later calls return ErrClosed
	// (Close itself returns nil again).
	Close() error
}

// Registration is an open publication. Its record stays visible until Close,
// until the directory is closed, until the record expires or until the owner
// dies.
type Registration interface {
	// Record returns the record as stored, with its Revision and Owner.
	Record() Record

	// Done is closed when the record is no longer published by this
	// registration; Err then says why.
	Done() <-chan struct{}

	// Err returns nil while the record is published, then ErrWithdrawn
	// (Close), ErrClosed (the directory closed), ErrExpired (Expires passed)
	// or an error matching ErrLost (the backend dropped the record, for
	// example an etcd lease that expired).
	Err() error

	// Close withdraws the record. It is safe to call more than once and
	// after Done; it returns nil when the record is no longer published.
	// When it returns an error, the record may still be published for a
	// while: the File backend keeps it and Close may be called again; a
	// lease-based backend (etcd) stops renewing it so that it expires.
	Close() error
}
