package structobj

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package returns wraps one or more of
// them, so callers can branch with errors.Is; the typed errors below carry
// the detail.
var (
	// ErrManifest reports a manifest that breaks a rule of Validate: a bad
	// name, shape, stride or part, a duplicate, an overlap, a limit
	// exceeded. The detail is a *ManifestError.
	ErrManifest = errors.New("structobj: invalid manifest")
	// ErrManifestWire reports an encoded manifest that DecodeManifest
	// rejects, for any reason. The detail is a *WireError; when the bytes
	// are well formed but describe an invalid manifest, it also wraps the
	// *ManifestError (and so ErrManifest).
	ErrManifestWire = errors.New("structobj: malformed manifest encoding")
	// ErrManifestVersion reports an encoded manifest of a version this
	// package does not read. It comes wrapped in a *WireError.
	ErrManifestVersion = errors.New("structobj: unsupported manifest version")
	// ErrManifestLimit reports a manifest, or an encoded one, over the
	// Limits in force: too many members, dimensions or metadata, too many
	// bytes. It comes wrapped in a *ManifestError or a *WireError.
	ErrManifestLimit = errors.New("structobj: manifest exceeds limits")
	// ErrMemberData reports ragged offsets or sparse coordinates, read from
	// the payload, that disagree with their member (CheckRagged,
	// CheckSparse). The detail is a *DataError.
	ErrMemberData = errors.New("structobj: invalid member data")
)

// ManifestError details an ErrManifest: the field at fault and why.
type ManifestError struct {
	// Field is the path of the field, as Go would write it from the
	// Manifest: "Members[3].Strides[1]", "Meta[0].Key", "Members" (the
	// count), "Meta" (the count or size), "Manifest" (the encoded size), or
	// "DType" from ParseDType.
	Field string
	// Reason says what is wrong with it.
	Reason string
	// Err is ErrManifestLimit when the field only exceeds the Limits, nil
	// otherwise.
	Err error
}

func (e *ManifestError) Error() string {
	return fmt.Sprintf("structobj: invalid manifest: %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrManifest, and Err when it is set.
func (e *ManifestError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrManifest, e.Err}
	}
	return []error{ErrManifest}
}

// WireError details an ErrManifestWire: where in the encoding decoding
// stopped and why.
type WireError struct {
	// Offset is the byte offset of the field at fault; for a manifest that
	// is well formed but invalid, the start of the metadata entry or member
	// record the rule concerns (the later one of a duplicate or overlapping
	// pair), or the count field of a count over the limits.
	Offset int
	// Reason says what is wrong there.
	Reason string
	// Err is the cause when there is one beyond malformed bytes:
	// ErrManifestVersion, ErrManifestLimit, or the *ManifestError of a rule
	// the decoded manifest breaks. Nil otherwise.
	Err error
}

func (e *WireError) Error() string {
	if me, ok := e.Err.(*ManifestError); ok {
		return fmt.Sprintf("structobj: decode manifest at offset %d: %s: %s", e.Offset, me.Field, me.Reason)
	}
	return fmt.Sprintf("structobj: decode manifest at offset %d: %s", e.Offset, e.Reason)
}

// Unwrap returns ErrManifestWire, and Err when it is set.
func (e *WireError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrManifestWire, e.Err}
	}
	return []error{ErrManifestWire}
}

// DataError details an ErrMemberData: which member's part holds a bad value.
type DataError struct {
	Member string // the member's name
	Part   string // "Offsets", "Indices", or "Data" for a wrong value count
	// Index is the offending entry: an offset's index, or a sparse entry
	// (0..NNZ-1); -1 when the part as a whole is wrong (its size, or a member
	// of the wrong kind).
	Index  int64
	Reason string // what is wrong
}

func (e *DataError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("structobj: member %q %s: %s", e.Member, e.Part, e.Reason)
	}
	return fmt.Sprintf("structobj: member %q %s[%d]: %s", e.Member, e.Part, e.Index, e.Reason)
}

// Unwrap returns ErrMemberData.
func (e *DataError) Unwrap() error { return ErrMemberData }
