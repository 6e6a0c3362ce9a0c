package gather

import "github.com/scatterkit/scatterkit/verbs/internal/gatherwire"

// Control methods of the gather service (see the package doc, # Format).
// The wire format is defined once, for both sides, in
// verbs/internal/gatherwire; the requester's names for its types
// (OwnerInfo, GatherError, GatherCode) are in verbs/engine.
const (
	MethodGatherInfo = gatherwire.MethodGatherInfo
	MethodGather     = gatherwire.MethodGather
)

// Inline replies: the default of Config.InlineMax, and its cap.
const (
	DefaultInlineMax = gatherwire.DefaultInlineMax
	MaxInlineReply   = gatherwire.MaxInlineReply
)
