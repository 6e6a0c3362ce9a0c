package verbs

import "time"

// LinkParams describes a connection for the cost model: what a transfer
// of S bytes in N work requests costs on it. Backends measure the fields
// the caller did not set (ConnectOptions.Link) when the connection is made;
// see each backend's package doc for how.
type LinkParams struct {
	// Bandwidth is the bulk transfer rate in bytes per second (B_net).
	Bandwidth float64
	// PostRate is the rate of small work requests in requests per second,
	// posted in batches and completed (R_post).
	PostRate float64
	// QueueDepth is the most work requests outstanding at once (Q): posted
	// and not yet polled.
	QueueDepth int
	// RTT is the round trip of a small control message (L).
	RTT time.Duration
	// RequestsOverlap says that the per-request work of a direct transfer
	// overlaps its bytes (a NIC processes requests while earlier ones
	// stream): its time is the larger of the two, as the RFC models it.
	// False (tcp, shm: the same cores do both) makes them add. A
	// transport states it; Merge keeps p's.
	RequestsOverlap bool
}

// Merge returns p with its zero fields taken from measured.
func (p LinkParams) Merge(measured LinkParams) LinkParams {
	if p.Bandwidth <= 0 {
		p.Bandwidth = measured.Bandwidth
	}
	if p.PostRate <= 0 {
		p.PostRate = measured.PostRate
	}
	if p.QueueDepth <= 0 {
		p.QueueDepth = measured.QueueDepth
	}
	if p.RTT <= 0 {
		p.RTT = measured.RTT
	}
	return p
}

// Complete reports whether every measured field (Bandwidth, PostRate, RTT)
// is set, so no probe is needed.
func (p LinkParams) Complete() bool {
	return p.Bandwidth > 0 && p.PostRate > 0 && p.RTT > 0
}
