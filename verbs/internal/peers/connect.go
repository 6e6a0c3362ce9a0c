package peers

import (
	"context"
	"fmt"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
	"github.com/scatterkit/scatterkit/verbs/internal/linkprobe"
)

// CheckConnect checks the options of a Connect of backend name and fills
// their defaults, the same for every backend (the requester's counterpart
// of listener.CheckOptions). QueueDepth 0 means verbs.DefaultQueueDepth;
// on a backend with lanes (streams) Lanes 0 means verbs.DefaultLanes, and
// on one without them Lanes is ignored, but in both it must lie within
// verbs.MaxLanes. The exposures must be valid (verbs.CheckExports) and at
// most frame.MaxRegions. Errors wrap verbs.ErrInvalid (or CheckExports'
// error) as "name: connect: ...".
func CheckConnect(name string, opts verbs.ConnectOptions, lanes bool) (verbs.ConnectOptions, error) {
	if lanes && opts.Lanes == 0 {
		opts.Lanes = verbs.DefaultLanes
	}
	if opts.QueueDepth == 0 {
		opts.QueueDepth = verbs.DefaultQueueDepth
	}
	if opts.Lanes < 0 || opts.Lanes > verbs.MaxLanes || opts.QueueDepth < 1 || opts.QueueDepth > verbs.MaxQueueDepth {
		return opts, fmt.Errorf("%s: connect: %d lanes, queue depth %d: %w", name, opts.Lanes, opts.QueueDepth, verbs.ErrInvalid)
	}
	if err := verbs.CheckExports(opts.Expose); err != nil {
		return opts, fmt.Errorf("%s: connect: %w", name, err)
	}
	if len(opts.Expose) > frame.MaxRegions {
		return opts, fmt.Errorf("%s: connect: %d exposures, at most %d: %w", name, len(opts.Expose), frame.MaxRegions, verbs.ErrInvalid)
	}
	return opts, nil
}

// Measure is the last step of a requester's Connect: it measures the link
// (linkprobe.Connect: reg registers the scratch memory, q is the new Conn's
// empty queue, and the owner's probe region is probeKey, probeLen bytes)
// and sends the result to the owner (PARAMS), whose Peers report it. On
// error the caller closes the connection.
func (s *Session) Measure(ctx context.Context, opts verbs.ConnectOptions, reg linkprobe.Registrar, q linkprobe.Queue,
	probeKey verbs.Key, probeLen uint64) (verbs.LinkParams, error) {
	link, err := linkprobe.Connect(ctx, opts, reg, linkprobe.Target{Queue: q, Ping: s.Ping, RemoteKey: probeKey, RemoteLen: probeLen})
	if err != nil {
		return link, err
	}
	s.c.Send(frame.Header{Type: frame.TypeParams, Len: frame.ParamsSize}, frame.AppendParams(nil, link))
	return link, nil
}
