// Command engramctl manages Engram tables on disk: it declares tables,
// populates them (from a raw file or generated rows), inspects, verifies
// and looks rows up, and measures lookups.
//
// A namespace directory (DIR/NAMESPACE) holds one snapshot file per table
// (package engram/snapshot) and, written by engramctl create, a manifest
// (tables.json) declaring each table's rows and row size, so the other
// subcommands know the specs without flags:
//
//	engramctl create   -dir D -ns N -table NAME:ROWS:ROWBYTES [-table ...]
//	engramctl populate -dir D -ns N -table NAME (-from FILE | -gen SEED)
//	engramctl inspect  -dir D -ns N [-discovery FILE|URI]
//	engramctl verify   -dir D -ns N [-table NAME]
//	engramctl lookup   -dir D -ns N -table NAME[,NAME...] -ids 1,2,-1,...
//	engramctl bench    -dir D -ns N -table NAME [-t 4096] [-k 24] [-reps 20]
//	engramctl serve    -dir D -ns N [-transport tcp|shm] [-listen ADDR] [-discovery FILE|URI]
//
// A table spread over owners by row ranges is declared per shard as
// NAME:ROWS:ROWBYTES:TABLE@FIRSTROW (rows [FIRSTROW, FIRSTROW+ROWS) of
// TABLE): populate -gen SEED then writes the shard's slice of TABLE's
// stream, and populate -from FILE takes the shard's slice of a file that
// holds the whole TABLE (or a file of exactly the shard). serve serves the
// namespace's populated tables (engram Store.Serve) until SIGINT or
// SIGTERM, publishing one record per table, with its shard's place, in a
// directory: a discovery file (default scatterd's:
// /dev/shm/scatterkit-discovery.json, or the temporary directory's where
// /dev/shm is missing) for the owners of one host, or an etcd cluster for
// many hosts, -discovery etcd://HOST:PORT[,HOST:PORT...]/PREFIX[?ttl=D]
// (etcds:// for TLS; the records live under PREFIX, each on a lease of
// ttl, default 10s, so a dead owner's records vanish after it); it prints
// a JSON ready line with its address. A remote store opened with
// engram.RemoteConfig.Directory on that directory finds every shard's
// owners (replicas: every owner serving the same shard) by namespace.
// inspect -discovery FILE|URI also lists the namespace's records.
//
// A table is declared when the namespace's tables.json lists it (name,
// rows, row size); only create declares tables. A snapshot file in the
// namespace whose table tables.json does not list is not declared.
//
// create replaces tables.json through a temporary file held under a lock;
// every command, before it reads tables.json, removes the temporary files
// that a killed create or populate left in the namespace (the manifest's,
// and a table's where the file system lacks O_TMPFILE), but never one that
// a live process holds.
//
// populate is create-only: a table that already has rows is refused. -gen
// SEED fills rows with a deterministic stream (package pattern), so lookup
// output can be checked against the seed.
//
// verify checks every declared table (with -table, only that one, which
// must be declared) against its declaration: its snapshot file must exist,
// hold the declared rows and row size, and pass every check of package
// engram/snapshot (header, checksum table, zero padding, every row block's
// checksum). It prints one line per table: "ok", "MISSING" (declared, not
// populated: the file is absent), "MISMATCH" (the file holds another
// shape) or "BAD" (the file fails a check), and exits 1, naming the failed
// tables, when any fails. Files of undeclared tables are not checked.
//
// lookup prints each output row as hex (-format hex, default) or a
// checksum per row (-format crc). bench runs T x K random lookups with the
// table named in every column and prints p50/p95 latency and goodput next
// to the pack-only ceiling (the same rows gathered with the same workers
// and no lookup layer) measured in the same run.
package main
