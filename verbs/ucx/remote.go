//go:build ucx

package ucx

import (
	"slices"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/ucx/internal/ucp"
)

// remoteRegion is a peer's listed region as this side reaches it: what
// the handshake said of it, its base address in the peer's process and
// its key unpacked for the endpoint.
type remoteRegion struct {
	info   verbs.RegionInfo
	base   uint64
	key    *ucp.RKey
	hidden bool // the owner's probe: reachable, not listed by Remote
}

// remoteTable is the peer's regions, for resolving work requests. A
// one-sided get or put is not seen by the peer's code, so the checks the
// other backends make on the serving side are made here, before a
// request is posted (the peer's registration bounds what UCX itself can
// reach: a key covers only the region it was packed for).
type remoteTable struct {
	regions []remoteRegion
}

// unpackRemote unpacks the peer's attachment (decoded against the regions
// its handshake listed, and its probe region when probe.Key is set) for
// ep. Call it on ep's loop thread.
func unpackRemote(ep *ucp.Endpoint, a *Attachment, listed []verbs.RegionInfo, probe verbs.RegionInfo) (*remoteTable, error) {
	t := &remoteTable{}
	for _, rk := range a.Regions {
		var info verbs.RegionInfo
		hidden := false
		for _, r := range listed {
			if r.Key == rk.Key {
				info = r
			}
		}
		if probe.Key != 0 && rk.Key == probe.Key {
			info, hidden = probe, true
		}
		if info.Key == 0 {
			t.destroy()
			return nil, &AttachError{Field: "region key", Reason: "not listed in the handshake"}
		}
		key, err := ep.UnpackKey(rk.Packed)
		if err != nil {
			t.destroy()
			return nil, err
		}
		t.regions = append(t.regions, remoteRegion{info: info, base: rk.Base, key: key, hidden: hidden})
	}
	return t, nil
}

// infos lists the peer's regions as Remote reports them (the probe not).
func (t *remoteTable) infos() []verbs.RegionInfo {
	var out []verbs.RegionInfo
	for _, r := range t.regions {
		if !r.hidden {
			out = append(out, r.info)
		}
	}
	return out
}

// resolve checks a request for n bytes at off of the peer's region k,
// needing access need, and returns the peer's address and the key to post
// it with, or the status the other backends answer such a request with.
// *c is the index of the region the last request of the batch named (a
// batch names few regions, most often one): it is tried first and kept.
func (t *remoteTable) resolve(c *int, k verbs.Key, off uint64, n uint32, need verbs.Access) (uint64, *ucp.RKey, verbs.Status) {
	i := *c
	if i < 0 || i >= len(t.regions) || t.regions[i].info.Key != k {
		i = slices.IndexFunc(t.regions, func(r remoteRegion) bool { return r.info.Key == k })
		if i < 0 {
			return 0, nil, verbs.StatusBadKey
		}
		*c = i
	}
	r := &t.regions[i]
	switch {
	case !r.info.Access.Has(need):
		return 0, nil, verbs.StatusAccess
	case off > r.info.Len || uint64(n) > r.info.Len-off:
		return 0, nil, verbs.StatusBounds
	}
	return r.base + off, r.key, verbs.StatusOK
}

// destroy releases the unpacked keys (on the endpoint's loop thread; it
// may run more than once). It leaves the table's regions as they are:
// Post may still resolve a request against them on another goroutine
// while the session ends, and the launch on the loop's thread then
// finds the session gone and posts nothing with the released key.
func (t *remoteTable) destroy() {
	for i := range t.regions {
		t.regions[i].key.Destroy()
	}
}
