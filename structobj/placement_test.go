package structobj

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlacementStable: every key gets Replicas distinct owners; the
// owners' order does not matter; removing an owner moves only the keys it
// held, and adding one moves only keys to it; the primaries spread over
// the owners.
func TestPlacementStable(t *testing.T) {
	owners := []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000", "10.0.0.4:7000", "10.0.0.5:7000"}
	p, err := NewPlacement(owners, 2)
	require.NoError(t, err)
	rev := []string{owners[4], owners[3], owners[2], owners[1], owners[0]}
	q, err := NewPlacement(rev, 2)
	require.NoError(t, err)
	less, err := NewPlacement(append([]string{owners[0], owners[1]}, owners[3:]...), 2) // owners[2] gone
	require.NoError(t, err)
	more, err := NewPlacement(append([]string{"10.0.0.9:7000"}, owners...), 2)
	require.NoError(t, err)
	primaries := map[string]int{}
	const keys = 5000
	moved := 0
	for i := range keys {
		key := fmt.Sprintf("kv/layer%d/page%d", i%61, i)
		a := p.Owners(nil, key)
		require.Len(t, a, 2)
		require.NotEqual(t, a[0], a[1])
		require.Equal(t, a, q.Owners(nil, key), "the owners' order does not matter")
		primaries[a[0]]++
		b := less.Owners(nil, key)
		if a[0] != owners[2] && a[1] != owners[2] {
			require.Equal(t, a, b, "a key that owners[2] did not hold stays")
		} else {
			require.NotContains(t, b, owners[2])
			for _, o := range a {
				if o != owners[2] {
					require.Contains(t, b, o, "the surviving replica keeps the key")
				}
			}
		}
		c := more.Owners(nil, key)
		if c[0] != "10.0.0.9:7000" && c[1] != "10.0.0.9:7000" {
			require.Equal(t, a, c, "only keys placed on the new owner move")
		} else {
			moved++
		}
	}
	for _, o := range owners {
		require.InDelta(t, keys/len(owners), primaries[o], float64(keys/len(owners)/4), "primaries of %s", o)
	}
	require.InDelta(t, keys*2/6, moved, float64(keys/10), "about 2/6 of the keys gain the new owner")

	for _, bad := range []struct {
		owners   []string
		replicas int
	}{{nil, 1}, {owners, 0}, {owners, 6}, {[]string{"a", "a"}, 1}, {[]string{"a", ""}, 1}} {
		_, err := NewPlacement(bad.owners, bad.replicas)
		require.ErrorIs(t, err, ErrClientConfig, "%v", bad)
	}
}

// TestGetManyReplicas: objects put on their placed replicas are read with
// GetMany across every owner; when an owner is closed, its keys are read
// from their other replica without an error; when both replicas of a key
// are gone its request fails naming both, and the others still succeed.
func TestGetManyReplicas(t *testing.T) {
	forBackends(t, func(t *testing.T, b backend) {
		r := newRand(t)
		ctx := testContext(t)
		owners := make([]*Owner, 3)
		addrs := make([]string, 3)
		for i := range owners {
			owners[i] = newTestOwner(t, b, OwnerConfig{ArenaBytes: 4 << 20})
			addrs[i] = owners[i].Addr()
		}
		p, err := NewPlacement(addrs, 2)
		require.NoError(t, err)
		c := newObjClient(t, b, ClientConfig{PoolBytes: 4 << 20, ChunkBytes: 16 << 10, InFlight: 2})
		const n = 24
		objs := make([]*Object, n)
		keys := make([]string, n)
		for i := range objs {
			keys[i] = fmt.Sprintf("obj%d", i)
			objs[i] = randomObject(t, r)
			vs, err := c.PutReplicas(ctx, p.Owners(nil, keys[i]), keys[i], objs[i])
			require.NoError(t, err)
			require.Len(t, vs, 2)
		}
		read := func() ([]GetRequest, error) {
			reqs := make([]GetRequest, n)
			for i := range reqs {
				reqs[i] = GetRequest{Key: keys[i], Replicas: p.Owners(nil, keys[i]), Select: []Select{{Member: "blob"}},
					Dst: [][]byte{make([]byte, len(memberBytes(objs[i], "blob")))}}
			}
			return reqs, c.GetMany(ctx, reqs)
		}
		reqs, err := read()
		require.NoError(t, err)
		for i, q := range reqs {
			require.Equal(t, memberBytes(objs[i], "blob"), q.Dst[0])
			require.Equal(t, p.Owners(nil, keys[i])[0], q.Served, "the primary serves")
		}
		victim := r.IntN(3)
		require.NoError(t, owners[victim].Close())
		reqs, err = read()
		require.NoError(t, err, "every key has a replica left")
		for i, q := range reqs {
			require.Equal(t, memberBytes(objs[i], "blob"), q.Dst[0])
			require.NotEqual(t, addrs[victim], q.Served)
		}
		second := (victim + 1) % 3
		require.NoError(t, owners[second].Close())
		reqs, err = read()
		require.Error(t, err)
		lost := 0
		for i, q := range reqs {
			o := p.Owners(nil, keys[i])
			gone := (o[0] == addrs[victim] || o[1] == addrs[victim]) && (o[0] == addrs[second] || o[1] == addrs[second])
			if !gone {
				require.NoError(t, q.Err, "key %s has a live replica", keys[i])
				require.Equal(t, memberBytes(objs[i], "blob"), q.Dst[0])
				continue
			}
			lost++
			var re *ReplicaError
			require.ErrorAs(t, q.Err, &re)
			require.Contains(t, q.Err.Error(), addrs[victim])
			require.Contains(t, q.Err.Error(), addrs[second])
		}
		require.Positive(t, lost, "some key lived on the two closed owners only")

		// A selection that is bad is the request's fault: no replica is
		// tried after the first.
		live := addrs[3-victim-second]
		k := 0
		for !slices.Contains(p.Owners(nil, keys[k]), live) {
			k++
		}
		bad := []GetRequest{{Key: keys[k], Replicas: []string{live, addrs[victim]}, Select: []Select{{Member: "nope"}}, Dst: [][]byte{nil}}}
		err = c.GetMany(ctx, bad)
		require.ErrorIs(t, err, ErrSelect)
		require.NotContains(t, err.Error(), addrs[victim], "the second replica was not tried")
		_, err = c.PutReplicas(ctx, nil, "k", objs[0])
		require.ErrorIs(t, err, ErrClientConfig)
	})
}
