// Package discovery maps a segment name (an owner's exported set of
// registered memory regions) to how to reach it: a Record with the transport
// ("shm", "tcp", ...), its address, the owner, a revision and free
// attributes.
//
// Owners Publish records and keep the returned Registration open; requesters
// Lookup, List or Watch them. A name held by a live owner cannot be taken
// over: Publish returns an *ExistsError. Records of owners that are gone go
// away by themselves, however the owner ended.
//
// # Backends
//
// Every backend implements Directory with the same contract; the
// discoverytest package checks it for each.
//
//   - Memory (NewMemory): one process. Owners are the registrations.
//   - File (NewFile): the processes of one host share one directory file.
//     Records carry their owner's pid, start time, boot id and pid namespace,
//     so the records of a process that exited or was killed are ignored by
//     readers and dropped by the next writer, even when the pid is reused.
//   - etcd (module github.com/scatterkit/scatterkit/verbs/discovery/etcd): a
//     cluster. Each record is attached to a lease its owner keeps alive.
//
// # Names
//
// A name is 1 to 255 bytes of [A-Za-z0-9._:/-], read as '/'-separated
// segments (for example "engram/layer3/shard0"); every segment is non-empty
// and starts with a letter or digit, so a name neither starts nor ends with
// '/'. List and Watch take a plain string prefix: "" (everything) or the
// beginning of a valid name ("engram/", "engram/lay"). ValidateName and
// ValidatePrefix return a *NameError (ErrInvalidName) for the others.
//
// A record needs a Transport (lowercase letters, digits, '+', '.', '-', at
// most 32 bytes, starting with a letter or digit) and an Addr (printable
// UTF-8, at most 1024 bytes). Owner is optional printable text (at most 256
// bytes; Publish fills DefaultOwner, "host/pid"). Attrs hold at most 64
// entries, keys like name segments of at most 128 bytes, values printable of
// at most 1024 bytes. Record.Validate returns a *RecordError
// (ErrInvalidRecord) for the others.
//
// # Revisions and expiry
//
// The directory gives every publication a Revision that grows within one
// store: a name published again gets a larger one, so a requester can tell a
// new owner from the one it knew. A record may carry an Expires time; from
// then on it is invisible and its name free, even if its owner lives.
//
// # Watch
//
// Watch returns an iter.Seq2[Event, error]. Each range over it is one watch:
// first an EventPut for every live record under the prefix, then changes.
// Memory and File watches compare snapshots instead of queueing events, so
// a slow consumer never blocks publishers and never loses the final state of
// a name, but quick successive changes may be merged. The sequence ends with
// one non-nil error (ctx.Err(), ErrClosed or a backend error), or when the
// loop body breaks; either way the watch releases everything it held.
//
// # Format
//
// The File backend keeps one JSON document (UTF-8, at most 16 MiB) at its
// path, replaced whole by writers through a temporary file in the same folder
// and a rename, under an exclusive flock of path + ".lock":
//
//	{
//	  "format":   "scatterkit-discovery",   // fixed
//	  "version":  1,                        // this layout
//	  "revision": 42,                       // last revision handed out, >= 0
//	  "records": [                          // sorted by name, names unique
//	    {
//	      "name":      "engram/t0",         // naming rules above
//	      "transport": "tcp",
//	      "addr":      "10.0.0.7:7000",
//	      "owner":     "node7/1234",        // omitted when empty
//	      "revision":  41,                  // 1..revision
//	      "attrs":     {"rkey": "9"},       // omitted when empty
//	      "expires":   "2026-11-30T10:00:00.5Z", // RFC 3339, omitted when none
//	      "holder": {
//	        "pid":   1234,                  // > 0
//	        "start": 987654,                // /proc/PID/stat field 22 (ticks after boot)
//	        "boot":  "6c1f...-...",         // /proc/sys/kernel/random/boot_id
//	        "pidns": 4026531836,            // inode of /proc/PID/ns/pid
//	        "id":    "9f86d081884c7d65"     // 16 lowercase hex digits, one per registration
//	      }
//	    }
//	  ]
//	}
//
// A missing or empty (only white space) file is an empty directory. A
// record is live while it has not expired and its holder runs: same boot id,
// and /proc/PID/stat shows the same start time and no zombie state (a holder
// in another pid namespace cannot be checked and counts as live). Writers
// drop records that are not live. A reader rejects, with a *CorruptError
// (ErrCorrupt), and never rewrites: invalid JSON, unknown fields, data after
// the object, another format or version, a record breaking the record rules,
// a record revision outside 1..revision, a holder with a non-positive pid, an
// empty boot id or a malformed id, and a name that appears twice. A new
// layout gets a new version; this code reads version 1 only.
package discovery
