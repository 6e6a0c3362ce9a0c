package structobj

import "github.com/scatterkit/scatterkit/structobj/internal/proto"

// The control protocol's names (see "Control protocol" in the package
// documentation; internal/proto defines them): the method ids of
// verbs.Conn.Call on an owner's segment, then the protocol's constants.
const (
	// MethodInfo asks for the owner's capabilities.
	MethodInfo uint16 = proto.MethodInfo
	// MethodReserve takes pending space for one payload.
	MethodReserve uint16 = proto.MethodReserve
	// MethodCommit installs a reserved, written payload under a key.
	MethodCommit uint16 = proto.MethodCommit
	// MethodAbort gives a reservation back.
	MethodAbort uint16 = proto.MethodAbort
	// MethodOpen takes a hold on a key's current object.
	MethodOpen uint16 = proto.MethodOpen
	// MethodClose releases a hold.
	MethodClose uint16 = proto.MethodClose
	// MethodDelete removes a key.
	MethodDelete uint16 = proto.MethodDelete
	// MethodPutInline stores an object whose payload is inside the call.
	MethodPutInline uint16 = proto.MethodPutInline
	// MethodGetInline returns an object's manifest and payload ranges
	// inside the reply.
	MethodGetInline uint16 = proto.MethodGetInline

	// RegionName is the export name of the owner's object region.
	RegionName = proto.RegionName
	// MaxKeyLen is the longest key a message may carry. The naming rules
	// (see NewOwner) make the usable length shorter by the record name's
	// prefix.
	MaxKeyLen = proto.MaxKeyLen
	// MaxInlineRanges bounds the ranges of one GetInline request.
	MaxInlineRanges = proto.MaxInlineRanges
	// MaxInlineLimit caps OwnerConfig.MaxInline: an inline message (up to
	// 16 MiB in the transports) carries the payload plus key and manifest.
	MaxInlineLimit = proto.MaxInlineLimit
	// MaxManifestBytes caps the encoded manifest a message carries (the
	// owner lowers Limits.MaxBytes to it), so that a manifest and an
	// inline payload of MaxInlineLimit bytes fit one control message.
	MaxManifestBytes = proto.MaxManifestBytes
	// MaxTTL is the longest reservation or hold TTL the protocol carries.
	MaxTTL = proto.MaxTTL
)
