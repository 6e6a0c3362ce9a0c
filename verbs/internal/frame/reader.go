package frame

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// Reader reads frames from a stream through one buffer. Small payloads are
// copied out of the buffer; the rest of a payload of at least Direct bytes
// is read from the stream straight into its destination. A Reader is used
// by one goroutine.
type Reader struct {
	src  io.Reader
	buf  []byte
	r, w int
	// Direct is the smallest remainder read straight into a destination
	// rather than through the buffer; it is at most the buffer size.
	Direct int
	// Checked makes every frame a checked one (see TrailerSize): Next
	// verifies the header's checksum before decoding it, and Verify the
	// payload's once the caller has read it.
	Checked bool

	want, sum uint32 // the payload checksum announced, and of what was read since Next
}

// NewReader returns a Reader with a size-byte buffer (at least 4 KiB).
func NewReader(src io.Reader, size int) *Reader {
	size = max(size, 4096)
	return &Reader{src: src, buf: make([]byte, size), Direct: min(64<<10, size)}
}

// Buffered returns how many bytes can be consumed without reading.
func (r *Reader) Buffered() int { return r.w - r.r }

// fill reads until at least n (<= len(buf)) bytes are buffered.
func (r *Reader) fill(n int) error {
	if r.w-r.r >= n {
		return nil
	}
	if len(r.buf)-r.r < n {
		r.w = copy(r.buf, r.buf[r.r:r.w])
		r.r = 0
	}
	for r.w-r.r < n {
		m, err := r.src.Read(r.buf[r.w:])
		RaceAcquire()
		r.w += m
		if err != nil {
			if r.w-r.r >= n {
				return nil
			}
			if errors.Is(err, io.EOF) && r.w != r.r {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// Next reads and decodes the next header. At a clean end of stream it
// returns io.EOF.
func (r *Reader) Next(h *Header) error {
	if !r.Checked {
		if err := r.fill(HeaderSize); err != nil {
			return err
		}
		err := Decode(h, r.buf[r.r:r.r+HeaderSize])
		r.r += HeaderSize
		return err
	}
	if err := r.fill(HeaderSize + TrailerSize); err != nil {
		return err
	}
	want, err := checkHeader(r.buf[r.r : r.r+HeaderSize+TrailerSize])
	if err == nil {
		err = Decode(h, r.buf[r.r:r.r+HeaderSize])
	}
	r.r += HeaderSize + TrailerSize
	r.want, r.sum = want, 0
	return err
}

// Verify checks, for a checked frame, that the payload read since Next
// (with ReadFull and Discard) has the checksum its header announced; a
// frame without payload announces 0. Call it once the payload is read,
// before acting on it. On an unchecked Reader it returns nil.
func (r *Reader) Verify() error {
	if !r.Checked || r.sum == r.want {
		return nil
	}
	return bad("payload", fmt.Sprintf("payload checksum %#08x, the frame says %#08x", r.sum, r.want))
}

// checkPiece is how much of a large payload a checked Reader reads before
// it checksums what it read.
const checkPiece = 64 << 10

// note adds b, just consumed, to the payload checksum.
func (r *Reader) note(b []byte) {
	if r.Checked {
		r.sum = crc32.Update(r.sum, castagnoli, b)
	}
}

// ReadFull fills dst with the next len(dst) bytes of the stream.
func (r *Reader) ReadFull(dst []byte) error {
	all := dst
	n := copy(dst, r.buf[r.r:r.w])
	r.r += n
	dst = dst[n:]
	for len(dst) > 0 {
		if len(dst) >= r.Direct {
			if !r.Checked {
				_, err := io.ReadFull(r.src, dst)
				RaceAcquire()
				return unexpected(err)
			}
			// Checked: read in pieces and checksum each while it is
			// still in the cache (one pass over a cold payload after
			// the whole read costs about as much as the read).
			r.note(all[:len(all)-len(dst)])
			for len(dst) > 0 {
				k := min(len(dst), checkPiece)
				_, err := io.ReadFull(r.src, dst[:k])
				RaceAcquire()
				if err != nil {
					return unexpected(err)
				}
				r.note(dst[:k])
				dst = dst[k:]
			}
			return nil
		}
		if err := r.fill(min(len(dst), len(r.buf))); err != nil {
			return unexpected(err)
		}
		n = copy(dst, r.buf[r.r:r.w])
		r.r += n
		dst = dst[n:]
	}
	r.note(all)
	return nil
}

// Discard skips the next n bytes of the stream.
func (r *Reader) Discard(n uint64) error {
	for n > 0 {
		if r.r == r.w {
			if err := r.fill(1); err != nil {
				return unexpected(err)
			}
		}
		k := uint64(r.w - r.r)
		k = min(k, n)
		r.note(r.buf[r.r : r.r+int(k)])
		r.r += int(k)
		n -= k
	}
	return nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
