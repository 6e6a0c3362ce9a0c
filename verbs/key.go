package verbs

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
)

// Key names a registered memory region in work requests. Keys are drawn
// from crypto/rand so a peer cannot guess the key of a region it was not
// told about; the zero Key is never issued and never valid.
type Key uint64

// NewKey returns a fresh random non-zero key.
func NewKey() (Key, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("verbs: new key: %w", err)
		}
		if k := Key(binary.LittleEndian.Uint64(b[:])); k != 0 {
			return k, nil
		}
	}
}

// String formats the key in hex.
func (k Key) String() string { return fmt.Sprintf("%#016x", uint64(k)) }
