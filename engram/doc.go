// Package engram is scatterkit's Engram store: namespaces of immutable,
// model-independent byte tables (NumRows rows of RowBytes bytes), kept as
// snapshot files and looked up by int32 or int64 ids into [T,K,R]
// outputs, locally on the CPU or from a remote owner through the transfer
// engine (package verbs). Hashes, scales and projections stay with the
// caller: a table is bytes.
//
// # Tables and snapshots
//
// Open takes the tables a store serves (name -> TableSpec), a namespace
// and either a local directory or a remote owner. A local store keeps
// each table as one snapshot file in Dir/Namespace (format and
// guarantees: package engram/snapshot). Populate copies rows into a new
// snapshot, published atomically and create-only: a table that holds
// rows is never overwritten (ErrExists), and a crash leaves no table or a
// complete one; where the file system lacks O_TMPFILE it may also leave a
// hidden temporary file, which the next Open of the namespace removes once
// no live process holds it. Open and Populate map snapshots read-only and
// shared, so processes using one directory share the pages, check them
// against the spec and every row block's checksum, and pin them in full
// as Config.Pin says.
//
// # Lookups
//
// Lookup(tables, ids, out, opts) reads [T,K] ids (IDs32 or IDs64) into
// out, a [T,K] array of R-byte rows given by byte strides (TokenMajor
// [T,K,R], HeadMajor [K,T,R], or any strides under which no two rows
// overlap). tables names one table per column; names may repeat. Id -1
// leaves its output row untouched; LookupOptions.Offsets turns global
// ids into table rows per column. Any other out-of-range id, like any bad
// argument, fails the whole call before a byte is written, with a typed
// error ([*IDError], [*ShapeError], [*ColumnError], [*OutputError],
// [*BufferError], [*TableError]) wrapping one of the sentinels below.
// Every lookup is checked once, in full, by the same check whichever the
// store, and then runs on the local or the remote path: local and remote
// lookups fail alike (errors.Is and errors.As with this package's names
// hold for both), every message starting "engram:". A remote lookup also
// takes no negative offset or stride.
//
// A local lookup is synchronous and runs the fixed-row gather loops of
// package bufferpool/pack, split among Config.Workers goroutines for
// large calls; columns that read one table in a layout one gather can
// cover (K repeated names into a token-major output: the DeepSeek layer
// read) are one gather, exactly the pack-only loop. Steady-state lookups
// allocate nothing.
//
// # Remote tables
//
// Store.Serve exports a local store's populated tables, read-only, over a
// verbs transport; a store opened with Config.Remote reads them. Its
// lookups write straight into a Buffer from Store.NewBuffer (memory
// registered with the transport and exposed to the owner): each lookup is
// lowered into one fixed-row scatter operation per table (never one
// request per row), which the transfer engine runs direct or has the
// owner gather, as its cost model decides.
//
// A remote store may read tables spread over several owners by row ranges
// (RemoteConfig.Shards, each shard on one or more replicas): a lookup is
// then one group of operations, a part per shard it touches, all in
// flight at once; a failed owner's rows are read from its shard's next
// replica within the same lookup, and a shard with no replica left fails
// the lookup whole with a *ShardError naming it. Owners found by name:
// a Server given ServeConfig.Directory publishes a record per served table
// (or shard, ServeConfig.Shards) for as long as it runs, and a remote
// store given RemoteConfig.Directory places its tables from those records
// (see DirectoryPrefix): the embedded directories of verbs/discovery on
// one host, or its etcd module across hosts.
//
// # Layers
//
// The older layer/head API (L layers x H heads of equally shaped tables,
// looked up by layer with [T,H] ids) is Layers, a thin view: OpenLayers,
// Layers.Populate(layer, head, rows), Layers.Lookup(layer, ids, out).
//
// # Lifetimes
//
// Lookups run concurrently with each other and with Populate of other
// tables; Remove and Close wait for the lookups in flight, then unmap.
// Output slices are the caller's and are written only during Lookup.
// A Server keeps its tables mapped: Remove refuses a served table and
// Close stops the servers first.
package engram
