package listener

import (
	"fmt"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
)

// CheckOptions validates the arguments of Transport.Listen and returns opts
// with zero fields set to their defaults. The error wraps
// verbs.ErrInvalid (or what verbs.CheckExports reports); the caller adds
// its backend prefix.
func CheckOptions(exports []verbs.Export, opts verbs.ListenOptions) (verbs.ListenOptions, error) {
	if err := verbs.CheckExports(exports); err != nil {
		return opts, err
	}
	if len(exports) > frame.MaxRegions {
		return opts, fmt.Errorf("%d exports, at most %d: %w", len(exports), frame.MaxRegions, verbs.ErrInvalid)
	}
	if opts.QueueDepth < 0 || opts.QueueDepth > verbs.MaxQueueDepth || opts.MaxCalls < 0 {
		return opts, fmt.Errorf("queue depth %d, max calls %d: %w", opts.QueueDepth, opts.MaxCalls, verbs.ErrInvalid)
	}
	if opts.MaxSessions < 0 || opts.MaxLanes < 0 || opts.MaxLanes > verbs.MaxLanes || opts.MaxCallBytes < 0 || opts.MaxConnCallBytes < 0 ||
		opts.MaxSegmentLanes < 0 || opts.MaxHandshakes < 0 {
		return opts, fmt.Errorf("max sessions %d, max lanes %d (at most %d), max call bytes %d, per connection %d: %w",
			opts.MaxSessions, opts.MaxLanes, verbs.MaxLanes, opts.MaxCallBytes, opts.MaxConnCallBytes, verbs.ErrInvalid)
	}
	if opts.MaxSessions == 0 {
		opts.MaxSessions = verbs.DefaultMaxSessions
	}
	if opts.MaxLanes == 0 {
		opts.MaxLanes = verbs.MaxLanes
	}
	if opts.MaxSegmentLanes == 0 {
		opts.MaxSegmentLanes = verbs.DefaultMaxSegLanes
	}
	if opts.MaxHandshakes == 0 {
		opts.MaxHandshakes = verbs.DefaultMaxHandshakes
	}
	if opts.MaxCallBytes == 0 {
		opts.MaxCallBytes = verbs.DefaultMaxCallBytes
	}
	if opts.MaxConnCallBytes == 0 {
		opts.MaxConnCallBytes = verbs.DefaultMaxConnCall
	}
	if opts.QueueDepth == 0 {
		opts.QueueDepth = verbs.DefaultPeerQueueDepth
	}
	if opts.MaxCalls == 0 {
		opts.MaxCalls = verbs.DefaultMaxCalls
	}
	return opts, nil
}
