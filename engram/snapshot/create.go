package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
)

const (
	// DefaultChunkBytes is the default bytes per write call, and the size
	// of the one buffer CreateFrom reads into.
	DefaultChunkBytes = 4 << 20
	// MaxChunkBytes bounds CreateOptions.ChunkBytes.
	MaxChunkBytes = 1 << 30
	// DefaultPerm is the default permission of a table file: read-only,
	// since a table never changes once published.
	DefaultPerm os.FileMode = 0o444
)

// tempInfix sits between the file name and the random suffix of the hidden
// temporary file used where O_TMPFILE is not available.
const tempInfix = ".tmp-"

// CreateOptions tunes Create and CreateFrom; nil means all defaults.
type CreateOptions struct {
	// FS is the file system; nil means OS. Tests inject faults here.
	FS FS
	// BlockBytes is the target size of a checksum block: each block of
	// whole rows gets its own CRC32C, so damage is located to a block.
	// 0 means DefaultBlockBytes; otherwise it must be in
	// [MinBlockBytes, MaxBlockBytes]. Blocks hold at least one row.
	BlockBytes int
	// ChunkBytes is the most bytes one write call carries, and the size of
	// CreateFrom's read buffer (its only buffer, whatever the table size).
	// 0 means DefaultChunkBytes; otherwise it must be in [1, MaxChunkBytes].
	ChunkBytes int
	// Perm is the table file's permission bits (less the umask); 0 means
	// DefaultPerm.
	Perm os.FileMode
}

func (o *CreateOptions) resolve() (CreateOptions, error) {
	var r CreateOptions
	if o != nil {
		r = *o
	}
	if r.FS == nil {
		r.FS = OS
	}
	switch {
	case r.BlockBytes == 0:
		r.BlockBytes = DefaultBlockBytes
	case r.BlockBytes < MinBlockBytes || r.BlockBytes > MaxBlockBytes:
		return r, &OptionError{Field: "BlockBytes", Value: int64(r.BlockBytes), Reason: fmt.Sprintf("must be 0 or in [%d, %d]", MinBlockBytes, MaxBlockBytes)}
	}
	switch {
	case r.ChunkBytes == 0:
		r.ChunkBytes = DefaultChunkBytes
	case r.ChunkBytes < 1 || r.ChunkBytes > MaxChunkBytes:
		return r, &OptionError{Field: "ChunkBytes", Value: int64(r.ChunkBytes), Reason: fmt.Sprintf("must be 0 or in [1, %d]", MaxChunkBytes)}
	}
	if r.Perm == 0 {
		r.Perm = DefaultPerm
	} else if r.Perm&^fs.ModePerm != 0 {
		return r, &OptionError{Field: "Perm", Value: int64(r.Perm), Reason: "only permission bits (0o777) are allowed"}
	}
	return r, nil
}

// Create publishes a new table in dir from rows, which must hold exactly
// spec.Size() bytes (row i at i*RowBytes). The rows are written straight
// from the slice, never copied. The file is built as an unnamed temporary
// file, synced, then linked into place create-only, and the directory
// synced (see the package documentation, Publishing): a crash at any point
// leaves either no table or the complete one, and on any error nothing is
// left behind. A table of that name already in dir fails with ErrExists
// and is not touched.
func Create(dir string, spec Spec, rows []byte, opts *CreateOptions) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	if int64(len(rows)) != spec.Size() {
		return &SourceError{Table: spec.Name, Want: spec.Size(), Got: int64(len(rows))}
	}
	return create(dir, spec, opts, func(w *rowWriter) error { return w.write(rows) })
}

// CreateFrom publishes a new table like Create, reading the rows from src:
// exactly spec.Size() bytes, in chunks of ChunkBytes through one buffer, so
// a table far larger than memory streams through. Bytes after the table
// are left unread. A source that ends early fails with a [*SourceError]
// (ErrSourceSize, io.ErrUnexpectedEOF), a source that fails with an
// [*OpError] wrapping its error; either way nothing is published.
func CreateFrom(dir string, spec Spec, src io.Reader, opts *CreateOptions) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	return create(dir, spec, opts, func(w *rowWriter) error {
		size := spec.Size()
		buf := make([]byte, min(int64(w.chunk), size))
		for w.done < size {
			n, err := io.ReadFull(src, buf[:min(int64(len(buf)), size-w.done)])
			switch {
			case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
				return &SourceError{Table: spec.Name, Want: size, Got: w.done + int64(n), Err: io.ErrUnexpectedEOF}
			case err != nil:
				return w.opErr(fmt.Sprintf("read rows from source at byte %d", w.done+int64(n)), err)
			}
			if err := w.write(buf[:n]); err != nil {
				return err
			}
		}
		return nil
	})
}

// create runs the publishing protocol around fill, which writes the rows.
func create(dir string, spec Spec, opts *CreateOptions, fill func(*rowWriter) error) error {
	o, err := opts.resolve()
	if err != nil {
		return err
	}
	h := newHeader(spec, blockRowsFor(spec, o.BlockBytes))
	file := FileName(spec.Name)
	opErr := func(step string, err error) *OpError {
		return &OpError{Op: "create", Dir: dir, Name: spec.Name, Step: step, Err: err}
	}

	d, err := o.FS.OpenDir(dir)
	if err != nil {
		return opErr("open directory", err)
	}
	// Closing a directory descriptor cannot lose anything the syncs made
	// durable, so its error is not the caller's concern.
	defer d.Close()

	// A cheap early answer for the common case; the create-only link below
	// is what actually guarantees it under races.
	if ok, err := d.Exists(file); err != nil {
		return opErr("check name", err)
	} else if ok {
		return opErr("check name", ErrExists)
	}

	var tmp string // the hidden name where O_TMPFILE is not available
	f, err := d.CreateTemp(o.Perm)
	if errors.Is(err, errors.ErrUnsupported) {
		tmp = tempName(file)
		f, err = d.CreateExclusive(tmp, o.Perm)
	}
	if err != nil {
		return opErr("create temporary file", err)
	}

	// abort undoes what was made and returns err, noting cleanup failures.
	open, published := true, false
	abort := func(err error) error {
		var errs []error
		if open {
			if e := f.Close(); e != nil {
				errs = append(errs, e)
			}
		}
		switch {
		case published:
			if e := d.Remove(file); e != nil {
				errs = append(errs, e)
			} else if e := d.Sync(); e != nil {
				errs = append(errs, e)
			}
		case tmp != "":
			if e := d.Remove(tmp); e != nil {
				errs = append(errs, e)
			}
		}
		if len(errs) == 0 {
			return err
		}
		cleanup := errors.Join(errs...)
		var oe *OpError
		if errors.As(err, &oe) && oe.Op == "create" {
			oe.CleanupErr = cleanup
			return oe
		}
		e := opErr("read rows from source", err) // a *SourceError
		e.CleanupErr = cleanup
		return e
	}

	if err := f.Allocate(h.FileSize); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return abort(opErr("allocate", err))
	}
	w := &rowWriter{f: f, h: &h, chunk: o.ChunkBytes, blockBytes: h.BlockBytes(), opErr: opErr,
		sums: make([]byte, 0, 4*h.NumBlocks)}
	if err := fill(w); err != nil {
		return abort(err)
	}
	w.finish()
	if int64(len(w.sums)) != 4*h.NumBlocks || w.done != spec.Size() {
		panic(fmt.Sprintf("snapshot: wrote %d row bytes and %d checksums for %v", w.done, len(w.sums)/4, spec))
	}
	h.SumsCRC = crc32.Checksum(w.sums, castagnoli)
	head := appendHeader(make([]byte, 0, h.SumsOffset+int64(len(w.sums))), &h)
	head = append(head, w.sums...)
	if err := writeAll(f, head, 0); err != nil {
		return abort(opErr("write header", err))
	}
	if err := f.Sync(); err != nil {
		return abort(opErr("sync file", err))
	}
	if tmp == "" {
		err = d.Link(f, file)
	} else {
		err = d.Rename(tmp, file)
	}
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			err = fmt.Errorf("%w: %w", ErrExists, err)
		}
		return abort(opErr("publish", err))
	}
	published = true
	open = false
	if err := f.Close(); err != nil {
		return abort(opErr("close file", err))
	}
	if err := d.Sync(); err != nil {
		return abort(opErr("sync directory", err))
	}
	return nil
}

// rowWriter writes the row region in chunks and checksums it block by block.
type rowWriter struct {
	f          File
	h          *Header
	chunk      int
	blockBytes int64
	done       int64  // row bytes written
	inBlock    int64  // bytes of the current block summed so far
	crc        uint32 // CRC32C of the current block so far
	sums       []byte // checksum table so far
	opErr      func(step string, err error) *OpError
}

// write checksums and writes p, the next row bytes, ChunkBytes at a time.
func (w *rowWriter) write(p []byte) error {
	for len(p) > 0 {
		c := p[:min(len(p), w.chunk)]
		w.sum(c)
		off := w.h.RowOffset + w.done
		if err := writeAll(w.f, c, off); err != nil {
			return w.opErr(fmt.Sprintf("write rows at file offset %d (%d bytes)", off, len(c)), err)
		}
		w.done += int64(len(c))
		p = p[len(c):]
	}
	return nil
}

// sum feeds c into the block checksums.
func (w *rowWriter) sum(c []byte) {
	for len(c) > 0 {
		k := min(int64(len(c)), w.blockBytes-w.inBlock)
		w.crc = crc32.Update(w.crc, castagnoli, c[:k])
		w.inBlock += k
		c = c[k:]
		if w.inBlock == w.blockBytes {
			w.sums = binary.LittleEndian.AppendUint32(w.sums, w.crc)
			w.crc, w.inBlock = 0, 0
		}
	}
}

// finish closes the last, short block.
func (w *rowWriter) finish() {
	if w.inBlock > 0 {
		w.sums = binary.LittleEndian.AppendUint32(w.sums, w.crc)
		w.crc, w.inBlock = 0, 0
	}
}

// writeAll writes p at off, turning a silent short write into an error.
func writeAll(f File, p []byte, off int64) error {
	n, err := f.WriteAt(p, off)
	if err == nil && n != len(p) {
		err = fmt.Errorf("%w: %d of %d bytes", io.ErrShortWrite, n, len(p))
	}
	return err
}

// tempName returns a fresh hidden temporary name for the table file name
// file: "." + file + ".tmp-" + 16 hex digits. It starts with '.', so it is
// never a valid table name: List and Open never see it.
func tempName(file string) string {
	return fmt.Sprintf(".%s%s%016x", file, tempInfix, rand.Uint64())
}
