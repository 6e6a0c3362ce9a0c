package engine

import "github.com/scatterkit/scatterkit/verbs/internal/gatherwire"

// The gather protocol's public names, as the requester sees them. They
// are the same types and values as the gather package's (both sides speak
// one wire format, defined once in verbs/internal/gatherwire).
type (
	// OwnerInfo is the owner's gather capability (MethodGatherInfo's
	// answer): its packing calibration, staging limits and the regions
	// the requester exposed on the connection.
	OwnerInfo = gatherwire.OwnerInfo
	// GatherError is the owner's refusal or abandonment of a gather
	// command, carried in an [*OpError]'s Gather field.
	GatherError = gatherwire.GatherError
	// GatherCode classifies a [GatherError].
	GatherCode = gatherwire.GatherCode
	// WireError reports a malformed gather info or reply message.
	WireError = gatherwire.WireError
)

// The codes of a [GatherError].
const (
	GatherRefused   = gatherwire.GatherRefused
	GatherExhausted = gatherwire.GatherExhausted
	GatherAborted   = gatherwire.GatherAborted
)

// Inline replies: the default of Config.InlineMax, and its cap.
const (
	DefaultInlineMax = gatherwire.DefaultInlineMax
	MaxInlineReply   = gatherwire.MaxInlineReply
)
