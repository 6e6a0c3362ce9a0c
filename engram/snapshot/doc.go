// Package snapshot stores Engram tables as immutable snapshot files: one
// file per table in a (namespace) directory, published atomically and
// create-only, reopened as read-only shared mappings, optionally pinned in
// memory in full, with every byte checked: the header, the checksum table
// and the rows by CRC32C checksums, the padding between the checksum table
// and the rows by being zero.
//
// A table is NumRows fixed-size rows of RowBytes bytes ([Spec]). [Create]
// publishes one from a []byte (written straight from the slice, never
// copied), [CreateFrom] from an io.Reader (streamed through one bounded
// buffer, so a 100 GB table never sits in the Go heap). [Open] maps it and
// returns a [Table] whose Rows are the row bytes; [List], [Remove],
// [ReadHeader], [Verify] and [CleanTemp] serve tools. A namespace is simply
// a directory; [ValidName] checks table and namespace names alike.
//
// # Format
//
// A table file is a header, a checksum table, zero padding up to the next
// multiple of RowAlign (64 KiB) and the rows. All integers are little
// endian; CRCs are CRC32C (Castagnoli), computed with hash/crc32, which
// uses the CPU's CRC instructions where there are any.
//
//	offset  size              field
//	     0  8                 magic "\x89ENGRAM\n"
//	     8  2                 version, 1
//	    10  2                 flags, 0 (none defined in version 1)
//	    12  4                 header length H = roundup(80 + n + 4, 8)
//	    16  8                 NumRows, >= 1
//	    24  8                 RowBytes, >= 1; NumRows*RowBytes <= MaxTableBytes
//	    32  8                 BlockRows: rows per checksum block
//	    40  8                 NumBlocks = ceil(NumRows / BlockRows)
//	    48  8                 checksum table offset = H
//	    56  8                 row offset R = roundup(H + 4*NumBlocks, RowAlign)
//	    64  8                 file size = R + NumRows*RowBytes
//	    72  4                 CRC32C of the checksum table
//	    76  2                 name length n, 1..200
//	    78  2                 reserved, 0
//	    80  n                 name ([A-Za-z0-9._-], not starting with '.')
//	  80+n  H-84-n            zero padding
//	   H-4  4                 header CRC: CRC32C of bytes [0, H-4)
//	     H  4*NumBlocks       checksum table: CRC32C of each block of rows
//	     .  R-H-4*NumBlocks   zero padding (never written; must be zero)
//	     R  NumRows*RowBytes  rows: row i at R + i*RowBytes (stride RowBytes)
//
// Block i covers rows [i*BlockRows, min((i+1)*BlockRows, NumRows)); the
// last block may be short. Create picks BlockRows as the whole rows that
// fit CreateOptions.BlockBytes (1 MiB by default), at least one row and at
// least MinBlockBytes (4 KiB), at most the whole table; a decoder accepts
// any BlockRows in [1, NumRows] whose blocks are at least MinBlockBytes
// (unless one block holds the whole table) and at most MaxBlockBytes
// (unless a block is one row). The checksum table is therefore at most
// about a thousandth of the rows, and a damaged byte is located to one
// block. There is no trailing padding: the file ends with the last row.
//
// A decoder ([DecodeHeader], [ReadHeader]) rejects a wrong magic; any
// version but 1 (ErrVersion); nonzero flags, reserved bytes or padding; a
// header length that does not match the name length; a header CRC
// mismatch; an invalid name; NumRows or RowBytes below 1 or a row region
// above MaxTableBytes; BlockRows outside the rule above; and any of
// NumBlocks, the checksum table offset, the row offset or the file size
// field differing from the values the spec and BlockRows determine. So
// only headers this package would write are accepted. A file opener
// ([Open], [Verify], [List]) also rejects a file whose size differs from
// the file size field (shorter: ErrTruncated; longer: ErrCorrupt), a
// header whose name is not the file's name, a checksum table whose CRC32C
// differs from the header's, a nonzero byte in the padding between the
// checksum table and row 0 ([*CorruptError] Field "row padding", at that
// byte's offset), and (Open and Verify, unless skipped) a row block whose
// CRC32C differs from the checksum table. No checksum covers that padding:
// it is shorter than RowAlign, so an opener reads it with the checksum
// table and requires every byte of it to be zero. Create never writes it;
// the file system supplies the zeros (a hole, or fallocated space).
//
// Rows start at a multiple of 64 KiB, a multiple of every Linux page size,
// so Open maps only the row region, from its own offset, and never the
// header. A later version that changes the layout gets a new version
// number; a version-1 reader refuses it rather than misreading it.
//
// # Publishing
//
// Create and CreateFrom work through an [FS] (the real one is [OS]; tests
// inject faults through their own):
//
//  1. fail early with ErrExists if the table's file name exists;
//  2. open an unnamed file in the directory (O_TMPFILE), or where the file
//     system lacks it a hidden ".<name>.engram.tmp-<hex>" file created
//     exclusively and held under flock;
//  3. reserve the file's full size (fallocate, where supported), so a full
//     disk fails before any row is written;
//  4. write the rows at R in chunks of CreateOptions.ChunkBytes, computing
//     each block's CRC32C as they pass, then the header and checksum table
//     at 0;
//  5. fsync the file;
//  6. publish it under its name, create-only: linkat of the unnamed file
//     (AT_EMPTY_PATH, or /proc/self/fd where that is not permitted), or
//     renameat2(RENAME_NOREPLACE) of the hidden one; an existing name
//     fails with ErrExists and is never replaced (a file system that has
//     neither O_TMPFILE nor RENAME_NOREPLACE fails here, with the system's
//     error, rather than risk an overwrite);
//  7. close the file and fsync the directory.
//
// Before step 6 the table has no name, so a crash (of the process or the
// machine) leaves no table; after it, the name points at a complete,
// synced file. On any error Create removes what it made (the temporary
// file, or the name it just published when closing or the directory sync
// fails) and returns an [*OpError] naming the step. A killed Create on the
// fallback path leaves its hidden temporary file behind: it is never listed
// or opened as a table (its name is not a valid table name), and
// [CleanTemp] removes it once no process holds its lock.
//
// # Opening and pinning
//
// Open checks everything above, then maps the rows PROT_READ and
// MAP_SHARED: every process that opens the table maps the same page-cache
// pages, so N readers cost one copy of the table. Unless
// OpenOptions.SkipRowChecksums is set it checks every block's CRC32C; that
// pass reads every page, so it doubles as the populate pass, and for tables
// of 32 MiB or more it runs on up to GOMAXPROCS goroutines. The pin mode
// ([PinNone], [PinBestEffort], [PinRequired]) then decides whether the rows
// are locked in memory with mlock. Locking more than RLIMIT_MEMLOCK (often
// 8 MiB) needs CAP_IPC_LOCK. When the lock is refused, PinRequired fails
// with a [*PinError] (ErrPin), and PinBestEffort falls back to populated
// but unlocked pages (MADV_POPULATE_READ, or one read per page on kernels
// before 5.14): Table.Locked is false and Table.PinErr says why; such pages
// can be evicted under memory pressure and are read back from the file.
//
// A table is immutable and its file read-only. Truncating a table file
// while a process has it mapped is outside the contract: touching the lost
// pages raises SIGBUS in that process.
//
// # Errors
//
// Sentinel errors (ErrExists, ErrNotExist, ErrCorrupt, ErrTruncated,
// ErrVersion, ErrSpecMismatch, ErrPin, ErrBadSpec, ErrBadName,
// ErrBadOptions, ErrSourceSize, ErrNotSupported) are wrapped by typed
// errors that carry the details; bad input is refused before anything is
// written, and a failed Create leaves the directory as it was.
//
// # Platforms
//
// The file and memory system calls go through golang.org/x/sys/unix and
// are Linux-only; elsewhere Create, CreateFrom, Open, Verify, Remove and
// CleanTemp return ErrNotSupported, while Spec, DecodeHeader, ReadHeader
// and List work.
package snapshot
