package frame

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/scatterkit/scatterkit/verbs"
)

// The seed corpora live in testdata/fuzz/<target>/ (written by
// TestGolden -update).

// FuzzDecode checks that Decode never panics, rejects only with a
// protocol error, and that every accepted header re-encodes to itself.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Header
		err := Decode(&h, b)
		if err != nil {
			if !errors.Is(err, verbs.ErrProtocol) {
				t.Fatalf("error %v is not a protocol error", err)
			}
			return
		}
		if out := Append(nil, &h); !bytes.Equal(out, b[:HeaderSize]) {
			t.Fatalf("re-encoded %x, decoded from %x", out, b[:HeaderSize])
		}
	})
}

// FuzzDecodeHello checks the handshake body decoder the same way.
func FuzzDecodeHello(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Hello
		err := DecodeHello(&h, b)
		if err != nil {
			if !errors.Is(err, verbs.ErrProtocol) {
				t.Fatalf("error %v is not a protocol error", err)
			}
			return
		}
		if out := AppendHello(nil, &h); !bytes.Equal(out, b) {
			t.Fatalf("re-encoded %x, decoded from %x", out, b)
		}
	})
}

// FuzzDecodeParams checks the PARAMS body decoder.
func FuzzDecodeParams(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeParams(b)
		if err != nil {
			if !errors.Is(err, verbs.ErrProtocol) {
				t.Fatalf("error %v is not a protocol error", err)
			}
			return
		}
		if out := AppendParams(nil, p); !bytes.Equal(out, b) {
			t.Fatalf("re-encoded %x, decoded from %x", out, b)
		}
	})
}

// FuzzReader feeds an arbitrary stream through a Reader the way a lane
// does, skipping payloads: it must end with EOF or a protocol error,
// never panic or loop.
func FuzzReader(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(&chunky{bytes.NewReader(b), 13}, 4096)
		var h Header
		for {
			err := r.Next(&h)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, verbs.ErrProtocol) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if h.Type == TypeRead || h.Len == 0 {
				continue
			}
			if h.Len <= 64 {
				if err := r.ReadFull(make([]byte, h.Len)); err != nil {
					return
				}
			} else if err := r.Discard(uint64(h.Len)); err != nil {
				return
			}
		}
	})
}
