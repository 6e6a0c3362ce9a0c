package structobj

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
)

// Placement spreads keys over owners with replicas, by rendezvous
// (highest random weight) hashing: a key's owners are the Replicas owners
// whose hash with the key ranks highest. It is stable: adding an owner
// moves to it only keys it now ranks first among the Replicas, and
// removing one moves only the keys it held, each to the next owner in its
// ranking. Every client with the same owner list places every key the
// same way (the hash is FNV-1a of the owner address and the key, mixed;
// no process seed). A Placement is immutable and safe for concurrent use.
type Placement struct {
	owners   []string
	hashes   []uint64
	replicas int
}

// NewPlacement places keys over owners (addresses, distinct, in any order:
// the order does not change a key's owners) with replicas owners per key
// (1 <= replicas <= len(owners)).
func NewPlacement(owners []string, replicas int) (*Placement, error) {
	bad := func(reason string) error { return &ClientConfigError{Field: "Placement", Reason: reason} }
	switch {
	case len(owners) == 0:
		return nil, bad("no owners")
	case replicas < 1 || replicas > len(owners):
		return nil, bad(fmt.Sprintf("%d replicas of %d owners", replicas, len(owners)))
	}
	p := &Placement{owners: slices.Clone(owners), replicas: replicas, hashes: make([]uint64, len(owners))}
	for i, o := range p.owners {
		if o == "" || slices.Contains(p.owners[:i], o) {
			return nil, bad(fmt.Sprintf("owner %d (%q): empty or repeated", i, o))
		}
		h := fnv.New64a()
		h.Write([]byte(o))
		p.hashes[i] = h.Sum64()
	}
	return p, nil
}

// Replicas returns how many owners hold each key.
func (p *Placement) Replicas() int { return p.replicas }

// Owners returns the owners of key, in preference order (the first is the
// primary), appended to dst[:0].
func (p *Placement) Owners(dst []string, key string) []string {
	h := fnv.New64a()
	h.Write([]byte(key))
	kh := h.Sum64()
	type ranked struct {
		w uint64
		i int
	}
	var buf [16]ranked
	rs := buf[:0]
	for i, oh := range p.hashes {
		rs = append(rs, ranked{mix(oh ^ kh), i})
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		if a.w != b.w {
			if a.w > b.w {
				return -1
			}
			return 1
		}
		return a.i - b.i
	})
	dst = dst[:0]
	for _, r := range rs[:p.replicas] {
		dst = append(dst, p.owners[r.i])
	}
	return dst
}

// mix is a 64-bit finalizer (splitmix64's), so that owner and key hashes
// that differ in a few bits rank independently.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// PutReplicas puts obj under key on every owner of addrs at once (a
// Placement's Owners of key, say) and returns each owner's version, in
// addrs' order. It fails, with every failed owner's error joined (each an
// *ReplicaError), unless all succeeded: the owners that did keep the new
// version, and a retry puts it again everywhere.
func (c *Client) PutReplicas(ctx context.Context, addrs []string, key string, obj *Object) ([]uint64, error) {
	if len(addrs) == 0 {
		return nil, &ClientConfigError{Field: "addrs", Reason: "no owner"}
	}
	versions := make([]uint64, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		if addr == "" {
			errs[i] = &ReplicaError{Addr: addr, Err: &ClientConfigError{Field: "addrs", Reason: "empty address"}}
			continue
		}
		wg.Go(func() {
			v, err := c.Put(ctx, addr, key, obj)
			versions[i] = v
			if err != nil {
				errs[i] = &ReplicaError{Addr: addr, Err: err}
			}
		})
	}
	wg.Wait()
	return versions, errors.Join(errs...)
}

// ReplicaError is one replica's failure: the owner at Addr, and why.
type ReplicaError struct {
	Addr string
	Err  error
}

func (e *ReplicaError) Error() string { return fmt.Sprintf("structobj: replica %s: %v", e.Addr, e.Err) }

// Unwrap returns the replica's error.
func (e *ReplicaError) Unwrap() error { return e.Err }
