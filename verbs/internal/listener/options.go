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
	if opts.QueueDepth == 0 {
		opts.QueueDepth = verbs.DefaultPeerQueueDepth
	}
	if opts.MaxCalls == 0 {
		opts.MaxCalls = verbs.DefaultMaxCalls
	}
	return opts, nil
}
