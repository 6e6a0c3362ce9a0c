package verbs

import (
	"fmt"
	"strings"
)

// Access is the set of operations a region permits.
type Access uint8

const (
	// AccessLocal lets the region be the local side of this process's work
	// requests: the destination of a READ, the source of a WRITE.
	AccessLocal Access = 1 << iota
	// AccessRemoteRead lets peers READ the region (when it is exported or
	// exposed to them).
	AccessRemoteRead
	// AccessRemoteWrite lets peers WRITE the region (when it is exported
	// or exposed to them).
	AccessRemoteWrite

	accessAll = AccessLocal | AccessRemoteRead | AccessRemoteWrite
)

// Valid reports whether a holds only known bits and at least one.
func (a Access) Valid() bool { return a != 0 && a&^accessAll == 0 }

// Has reports whether a includes every bit of need.
func (a Access) Has(need Access) bool { return a&need == need }

// String lists the bits, e.g. "local|remote-read".
func (a Access) String() string {
	if a == 0 {
		return "none"
	}
	var parts []string
	if a&AccessLocal != 0 {
		parts = append(parts, "local")
	}
	if a&AccessRemoteRead != 0 {
		parts = append(parts, "remote-read")
	}
	if a&AccessRemoteWrite != 0 {
		parts = append(parts, "remote-write")
	}
	if rest := a &^ accessAll; rest != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint8(rest)))
	}
	return strings.Join(parts, "|")
}

// Region is registered memory: a byte slice, the key that names it in work
// requests and the access it permits. Transports create regions
// (Transport.Register, Transport.Alloc); a Region is immutable and safe to
// share between goroutines. Its bytes stay valid until it is deregistered;
// for transport-owned memory (Alloc) they must not be touched afterwards.
type Region struct {
	key    Key
	buf    []byte
	access Access
}

// NewRegion wraps buf in a Region with a fresh key. It is the constructor
// transports use inside Register and Alloc; a Region made directly is not
// known to any transport, so work requests naming it fail with ErrBadKey.
func NewRegion(buf []byte, access Access) (*Region, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("verbs: region of 0 bytes: %w", ErrInvalid)
	}
	if !access.Valid() {
		return nil, fmt.Errorf("verbs: region access %s: %w", access, ErrInvalid)
	}
	k, err := NewKey()
	if err != nil {
		return nil, err
	}
	return &Region{key: k, buf: buf, access: access}, nil
}

// Key returns the key that names the region in work requests.
func (r *Region) Key() Key { return r.key }

// Bytes returns the region's memory (not a copy).
func (r *Region) Bytes() []byte { return r.buf }

// Len returns the region's length in bytes.
func (r *Region) Len() int { return len(r.buf) }

// Access returns the operations the region permits.
func (r *Region) Access() Access { return r.access }

// Info describes the region to peers under name.
func (r *Region) Info(name string) RegionInfo {
	return RegionInfo{Name: name, Key: r.key, Len: uint64(len(r.buf)), Access: r.access}
}

// RegionInfo describes a region a peer has exported (Conn.Remote) or
// exposed (Peer.Remote): what to put in WorkRequest.RemoteKey and the
// bounds and access the other side enforces.
type RegionInfo struct {
	Name   string
	Key    Key
	Len    uint64
	Access Access
}

// MaxNameLen is the longest export name (bytes).
const MaxNameLen = 255

// Export names a region to serve to peers (Transport.Listen) or to expose
// to the owner of a segment for owner-initiated work requests
// (ConnectOptions.Expose).
type Export struct {
	Name   string
	Region *Region
}

// FindRegion returns the descriptor named name from infos.
func FindRegion(infos []RegionInfo, name string) (RegionInfo, bool) {
	for _, ri := range infos {
		if ri.Name == name {
			return ri, true
		}
	}
	return RegionInfo{}, false
}

// CheckExports validates a set of exports: non-nil regions, distinct
// non-empty names of at most MaxNameLen bytes, distinct regions, and at
// least one remote access bit on each. Transports call it from Listen and
// Connect.
func CheckExports(exports []Export) error {
	names := make(map[string]struct{}, len(exports))
	keys := make(map[Key]struct{}, len(exports))
	for i, e := range exports {
		switch {
		case e.Region == nil:
			return fmt.Errorf("verbs: export %d: nil region: %w", i, ErrInvalid)
		case e.Name == "" || len(e.Name) > MaxNameLen:
			return fmt.Errorf("verbs: export %d: name length %d not in [1, %d]: %w", i, len(e.Name), MaxNameLen, ErrInvalid)
		case e.Region.access&(AccessRemoteRead|AccessRemoteWrite) == 0:
			return fmt.Errorf("verbs: export %q: region access %s has no remote bit: %w", e.Name, e.Region.access, ErrAccess)
		}
		if _, dup := names[e.Name]; dup {
			return fmt.Errorf("verbs: export %q: duplicate name: %w", e.Name, ErrInvalid)
		}
		if _, dup := keys[e.Region.key]; dup {
			return fmt.Errorf("verbs: export %q: region exported twice: %w", e.Name, ErrInvalid)
		}
		names[e.Name] = struct{}{}
		keys[e.Region.key] = struct{}{}
	}
	return nil
}
