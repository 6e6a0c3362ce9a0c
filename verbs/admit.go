package verbs

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
)

// PeerIdentity is what a transport knows of a peer connecting to a
// segment, handed to ListenOptions.Admit before anything is served.
type PeerIdentity struct {
	// Transport is the backend's name: "tcp", "shm" or "ucx".
	Transport string
	// Addr is the peer's address as the transport sees it (tcp and ucx:
	// its ip:port; shm: the segment's socket address).
	Addr string
	// Cred is the peer process's identity as the kernel reports it (shm:
	// SO_PEERCRED, fixed when the peer connected); nil where the
	// transport has none (tcp).
	Cred *PeerCred
}

// PeerCred is a local peer process's identity as the kernel reports it.
type PeerCred struct {
	PID      int32
	UID, GID uint32
}

// AdmitFunc decides whether a segment serves a connecting peer and what
// it may do there. It returns the access granted to the peer: at most
// AccessRemoteRead|AccessRemoteWrite, intersected with each export's own
// access (so AccessRemoteRead admits the peer read-only), or an error to
// refuse it: the peer is answered "not admitted" (its Connect fails with
// an error wrapping ErrNotAdmitted), the connection is closed, and the
// error, wrapped in an [*AdmitError], goes to ListenOptions.OnError. A
// grant without AccessRemoteRead is a refusal too. Admit runs on the
// handshake's goroutine, once per connection; it must not block for long.
type AdmitFunc func(PeerIdentity) (Access, error)

// AdmitError reports a peer that a segment's admission policy refused.
type AdmitError struct {
	Peer PeerIdentity
	Err  error // the policy's reason; wraps ErrNotAdmitted
}

func (e *AdmitError) Error() string {
	who := e.Peer.Addr
	if c := e.Peer.Cred; c != nil {
		who = fmt.Sprintf("%s (pid %d, uid %d, gid %d)", who, c.PID, c.UID, c.GID)
	}
	return fmt.Sprintf("verbs: %s peer %s not admitted: %v", e.Peer.Transport, who, e.Err)
}

func (e *AdmitError) Unwrap() error { return e.Err }

// Admit applies policy (nil: admit with full access) to id and returns
// the access granted, within AccessRemoteRead|AccessRemoteWrite, or an
// *AdmitError wrapping ErrNotAdmitted. Transports call it from their
// handshakes.
func Admit(policy AdmitFunc, id PeerIdentity) (Access, error) {
	const full = AccessRemoteRead | AccessRemoteWrite
	if policy == nil {
		return full, nil
	}
	a, err := policy(id)
	switch {
	case err != nil:
		return 0, &AdmitError{Peer: id, Err: fmt.Errorf("%w: %w", ErrNotAdmitted, err)}
	case a&AccessRemoteRead == 0:
		return 0, &AdmitError{Peer: id, Err: fmt.Errorf("%w: granted %v", ErrNotAdmitted, a)}
	}
	return a & full, nil
}

// UIDPolicy admits local peers by the user id the kernel reports for
// them: users in Write may read and write the exports (as each export's
// access allows), users in Read may only read them, and every other user
// is refused, as is a peer without credentials (tcp). Its Admit method is
// an AdmitFunc.
type UIDPolicy struct {
	Write []uint32
	Read  []uint32
}

// OwnUIDPolicy admits only this process's effective user, with full
// access: the shm transport's default.
func OwnUIDPolicy() UIDPolicy { return UIDPolicy{Write: []uint32{uint32(os.Geteuid())}} }

// Admit implements the policy as an AdmitFunc.
func (p UIDPolicy) Admit(id PeerIdentity) (Access, error) {
	if id.Cred == nil {
		return 0, fmt.Errorf("no peer credentials on %s", id.Transport)
	}
	switch {
	case slices.Contains(p.Write, id.Cred.UID):
		return AccessRemoteRead | AccessRemoteWrite, nil
	case slices.Contains(p.Read, id.Cred.UID):
		return AccessRemoteRead, nil
	}
	return 0, fmt.Errorf("uid %d is not allowed", id.Cred.UID)
}

// NetPolicy admits peers by their IP address (tcp and ucx, whose Addr is
// ip:port): a peer in one of Write's networks may read and write the
// exports (as each export's access allows), one in Read's may only read,
// and every other peer is refused, as is one whose Addr is no ip:port
// (shm). Its Admit method is an AdmitFunc.
type NetPolicy struct {
	Write []netip.Prefix
	Read  []netip.Prefix
}

// LoopbackPolicy admits only peers connecting from this host (a loopback
// address), with full access: the ucx transport's default.
func LoopbackPolicy() NetPolicy {
	return NetPolicy{Write: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
}

// Admit implements the policy as an AdmitFunc.
func (p NetPolicy) Admit(id PeerIdentity) (Access, error) {
	ap, err := netip.ParseAddrPort(id.Addr)
	if err != nil {
		return 0, fmt.Errorf("%s peer address %q is no ip:port", id.Transport, id.Addr)
	}
	ip := ap.Addr().Unmap()
	in := func(nets []netip.Prefix) bool {
		return slices.ContainsFunc(nets, func(n netip.Prefix) bool { return n.Contains(ip) })
	}
	switch {
	case in(p.Write):
		return AccessRemoteRead | AccessRemoteWrite, nil
	case in(p.Read):
		return AccessRemoteRead, nil
	}
	return 0, fmt.Errorf("address %s is in no allowed network", ip)
}

// GrantedInfos returns infos as a peer granted access sees them: every
// access bit outside the grant cleared. withhold lists the regions to
// leave out entirely instead (a backend that cannot enforce the reduced
// access, such as shm for a region peers may write, withholds it); the
// result aliases infos when nothing changes.
func GrantedInfos(infos []RegionInfo, granted Access, withhold func(RegionInfo) bool) []RegionInfo {
	const remote = AccessRemoteRead | AccessRemoteWrite
	if granted&remote == remote {
		return infos
	}
	out := make([]RegionInfo, 0, len(infos))
	for _, ri := range infos {
		if ri.Access&^granted&remote != 0 && withhold != nil && withhold(ri) {
			continue
		}
		ri.Access &^= remote &^ granted
		if ri.Access&remote == 0 {
			continue
		}
		out = append(out, ri)
	}
	return out
}
