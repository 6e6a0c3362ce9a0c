package engram

import (
	"errors"

	"github.com/scatterkit/scatterkit/engram/internal/lookup"
	"github.com/scatterkit/scatterkit/engram/internal/remote"
)

// Errors of the store. Detailed failures wrap one of these (or one of
// package snapshot's, for file problems) in a typed error; test for them
// with [errors.Is].
var (
	// ErrClosed is returned by every method of a closed Store.
	ErrClosed = errors.New("engram: store closed")
	// ErrConfig means Open was given an unusable configuration: no tables,
	// both or neither of a local directory and a remote owner, a bad
	// namespace or table name, a spec with no rows or no row bytes.
	ErrConfig = errors.New("engram: invalid configuration")
	// ErrUnknownTable means a name is not one of the store's tables.
	ErrUnknownTable = lookup.ErrUnknownTable
	// ErrExists is returned by Populate for a table that already holds
	// rows: tables are immutable and create-only.
	ErrExists = errors.New("engram: table already populated")
	// ErrNotPopulated means a lookup named a table that has no rows yet.
	ErrNotPopulated = errors.New("engram: table not populated")
	// ErrRowsSize means Populate was given rows whose length is not
	// NumRows x RowBytes.
	ErrRowsSize = errors.New("engram: rows do not match the table spec")
	// ErrReadOnly is returned by Populate and Remove on a store served by
	// a remote owner: its tables are the owner's.
	ErrReadOnly = errors.New("engram: remote store is read-only")
	// ErrUnregisteredOutput means a remote lookup's output does not lie in
	// a buffer from Store.NewBuffer, the memory the owner may write;
	// [*BufferError] says why.
	ErrUnregisteredOutput = lookup.ErrUnregisteredOutput
	// ErrServed is returned by Remove for a table an open Server exports
	// or an open DeviceTables maps.
	ErrServed = errors.New("engram: table is being served")
	// ErrBadLayer means a layer or head index is out of range.
	ErrBadLayer = errors.New("engram: layer or head out of range")

	// Lookup argument errors: the lookup core's values, which local and
	// remote lookups both return, each detailed by a typed error below.
	// ErrShape: ids, table names, offsets and [T,K] disagree
	// ([*ShapeError]; a remote lookup's negative offset, [*ColumnError]).
	ErrShape = lookup.ErrShape
	// ErrRowBytes: the columns' tables have different row sizes
	// ([*ColumnError]).
	ErrRowBytes = lookup.ErrRowBytes
	// ErrOutput: the output does not fit its buffer, has negative offsets
	// or strides, or two of its rows overlap (or overlap a table)
	// ([*OutputError]).
	ErrOutput = lookup.ErrOutput
	// ErrID: an id is neither -1 nor a row of its column's table once the
	// column's offset is subtracted; [*IDError] says which.
	ErrID = lookup.ErrID
)

// The typed errors of the store and its lookups, local and remote alike
// (the lookup core's types, so errors.As finds them whichever path
// failed). Every message starts "engram:".
type (
	// IDError details an ErrID: the first bad id in token-major order,
	// with its column's table.
	IDError = lookup.IDError
	// ShapeError details an ErrShape about the whole request.
	ShapeError = lookup.ShapeError
	// ColumnError details an ErrRowBytes (or a remote lookup's negative
	// offset, ErrShape) about one column and its table.
	ColumnError = lookup.ColumnError
	// OutputError details an ErrOutput.
	OutputError = lookup.OutputError
	// BufferError details an ErrUnregisteredOutput.
	BufferError = lookup.BufferError
	// TableError is an error about one table; Op is "populate", "open",
	// "remove", "lookup", ...
	TableError = lookup.TableError
	// ShardError is a remote lookup's error when a shard of a sharded
	// table (RemoteShard) has no replica left: it names the table, the
	// shard's rows and its owners.
	ShardError = remote.ShardError
	// TransferError is a remote lookup's failed transfer (or, for
	// LookupDevice, device copy): the table and columns of the failed
	// operation, and its cause (an engine error: errors.As finds the
	// engine's *OpError or *DeviceError through it).
	TransferError = remote.TransferError
)
