package gather

import "github.com/scatterkit/scatterkit/verbs/internal/gatherwire"

// The gather protocol's public names, as the owner sees them. They are
// the same types and values as the engine package's (both sides speak one
// wire format, defined once in verbs/internal/gatherwire).
type (
	// OwnerInfo is what the service answers to MethodGatherInfo.
	OwnerInfo = gatherwire.OwnerInfo
	// GatherError is the error a service handler returns; the requester
	// receives its text in a [*verbs.CallError].
	GatherError = gatherwire.GatherError
	// GatherCode classifies a [GatherError].
	GatherCode = gatherwire.GatherCode
)

// The codes of a [GatherError].
const (
	GatherRefused   = gatherwire.GatherRefused
	GatherExhausted = gatherwire.GatherExhausted
	GatherAborted   = gatherwire.GatherAborted
)

// Control methods of the gather service (see the package doc, # Format).
const (
	MethodGatherInfo = gatherwire.MethodGatherInfo
	MethodGather     = gatherwire.MethodGather
)

// Inline replies: the default of Config.InlineMax, and its cap.
const (
	DefaultInlineMax = gatherwire.DefaultInlineMax
	MaxInlineReply   = gatherwire.MaxInlineReply
)
