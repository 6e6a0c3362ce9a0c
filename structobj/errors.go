package structobj

import (
	"errors"
	"fmt"
	"strings"

	"github.com/scatterkit/scatterkit/structobj/internal/proto"
	"github.com/scatterkit/scatterkit/verbs"
)

// Sentinel errors. Every error this package returns wraps one or more of
// them, so callers can branch with errors.Is; the typed errors below carry
// the detail. A failed control call reaches the client as an *OwnerError
// that matches the sentinel of its Code.
var (
	// Manifests.

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

	// Objects and selections in the client's memory.

	// ErrObject reports an Object whose Data does not match its manifest
	// (a count or a length), whose manifest is invalid, or whose ragged
	// offsets or sparse coordinates are invalid, and Builder input that
	// cannot form a member. The detail is an *ObjectError. Nothing was
	// sent.
	ErrObject = errors.New("structobj: invalid object")
	// ErrSelect reports a selection that names no member or reaches
	// outside it, or destinations of the wrong number or length. The
	// detail is a *SelectError.
	ErrSelect = errors.New("structobj: invalid selection")

	// The owner and the control protocol.

	// ErrNotFound: no such key, reservation or hold.
	ErrNotFound = errors.New("structobj: not found")
	// ErrNoSpace: the owner's arena (or its object table) cannot hold
	// the request. See NoSpaceError.
	ErrNoSpace = errors.New("structobj: no space")
	// ErrExpired: the reservation or hold passed its TTL and its space
	// or object was released.
	ErrExpired = errors.New("structobj: expired")
	// ErrRefused: the owner refused the request: malformed, over a limit,
	// an invalid key or manifest, a reservation or hold of another
	// connection, a manifest larger than its reservation. Nothing changed.
	ErrRefused = errors.New("structobj: refused")
	// ErrBusy: the owner's tables of reservations or holds are full, or
	// its directory could not publish the key for now; retry later.
	ErrBusy = errors.New("structobj: busy")
	// ErrClosed: the owner is closed or closing.
	ErrClosed = errors.New("structobj: owner closed")
	// ErrProtocol: a message could not be decoded. See MessageError.
	// (The control protocol's decoders, in internal/proto, return it.)
	ErrProtocol = proto.ErrProtocol

	// Configuration and the client.

	// ErrConfig is matched by a *ConfigError.
	ErrConfig = errors.New("structobj: invalid owner config")
	// ErrClientConfig is matched by a *ClientConfigError, and by calls
	// that need what the configuration left out (a key without an address
	// on a client without a Directory).
	ErrClientConfig = errors.New("structobj: invalid client config")
	// ErrClientClosed is returned by calls on a closed Client.
	ErrClientClosed = errors.New("structobj: client closed")
	// ErrNoPool is returned by NewBuffer on a client without a pool.
	ErrNoPool = errors.New("structobj: client has no pool")
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

// ObjectError details an ErrObject.
type ObjectError struct {
	// Field is what is wrong: "Manifest", "Data" (the count), "Data[3]"
	// (one slice), or for the Builder the member being added,
	// "Members[2]".
	Field string
	// Reason says what is wrong with it.
	Reason string
	// Err is the cause when there is one: the *ManifestError of an invalid
	// manifest, the *DataError of bad ragged offsets or sparse
	// coordinates. Nil otherwise.
	Err error
}

func (e *ObjectError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("structobj: invalid object: %s: %s: %v", e.Field, e.Reason, e.Err)
	}
	return fmt.Sprintf("structobj: invalid object: %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrObject, and Err when it is set.
func (e *ObjectError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrObject, e.Err}
	}
	return []error{ErrObject}
}

// SelectError details an ErrSelect.
type SelectError struct {
	// Index is the selection (and its destination) at fault, or -1 when
	// the number of destinations is wrong.
	Index int
	// Member is the selection's member name ("" for the payload itself).
	Member string
	// Reason says what is wrong.
	Reason string
}

func (e *SelectError) Error() string {
	if e.Index < 0 {
		return "structobj: invalid selection: " + e.Reason
	}
	return fmt.Sprintf("structobj: invalid selection %d (member %q): %s", e.Index, e.Member, e.Reason)
}

// Unwrap returns ErrSelect.
func (e *SelectError) Unwrap() error { return ErrSelect }

// NoSpaceError reports a reservation the owner's arena cannot hold. It
// matches ErrNoSpace.
type NoSpaceError struct {
	// Want is the space asked for, rounded up to Align.
	Want uint64
	// Free is the free space in all; Largest the largest free extent,
	// which is what a reservation needs.
	Free, Largest uint64
}

func (e *NoSpaceError) Error() string {
	return fmt.Sprintf("structobj: no space for %d bytes (%d free, largest free extent %d)", e.Want, e.Free, e.Largest)
}

// Unwrap returns ErrNoSpace.
func (e *NoSpaceError) Unwrap() error { return ErrNoSpace }

// Code is the stable code of a failed call, carried in the error text.
type Code string

// Codes of failed calls and the sentinels they match.
const (
	CodeNotFound Code = "notfound" // ErrNotFound
	CodeNoSpace  Code = "nospace"  // ErrNoSpace
	CodeExpired  Code = "expired"  // ErrExpired
	CodeRefused  Code = "refused"  // ErrRefused
	CodeBusy     Code = "busy"     // ErrBusy
	CodeClosed   Code = "closed"   // ErrClosed
)

// sentinel returns the error a code matches (nil for an unknown code).
func (c Code) sentinel() error {
	switch c {
	case CodeNotFound:
		return ErrNotFound
	case CodeNoSpace:
		return ErrNoSpace
	case CodeExpired:
		return ErrExpired
	case CodeRefused:
		return ErrRefused
	case CodeBusy:
		return ErrBusy
	case CodeClosed:
		return ErrClosed
	}
	return nil
}

// OwnerError is a failed call: the owner's handlers return it, and a
// client gets it back from the verbs.CallError that carried its text. It
// matches the sentinel of its code and, on the client, the CallError
// (hence verbs.ErrHandler).
type OwnerError struct {
	Code   Code
	Detail string
	// Call is the transport's error that carried the text (client side
	// only).
	Call *verbs.CallError
}

// Error returns "structobj <code>: <detail>", the text that travels.
func (e *OwnerError) Error() string { return "structobj " + string(e.Code) + ": " + e.Detail }

// Unwrap returns the code's sentinel and the CallError, when known.
func (e *OwnerError) Unwrap() []error {
	out := make([]error, 0, 2)
	if s := e.Code.sentinel(); s != nil {
		out = append(out, s)
	}
	if e.Call != nil {
		out = append(out, e.Call)
	}
	return out
}

// parseOwnerError parses the text of an owner's error. Unknown codes are
// kept (matching no sentinel); text not in the format returns false.
func parseOwnerError(msg string) (*OwnerError, bool) {
	rest, ok := strings.CutPrefix(msg, "structobj ")
	if !ok {
		return nil, false
	}
	code, detail, ok := strings.Cut(rest, ": ")
	if !ok || code == "" || len(code) > 32 {
		return nil, false
	}
	for _, c := range []byte(code) {
		if c < 'a' || c > 'z' {
			return nil, false
		}
	}
	return &OwnerError{Code: Code(code), Detail: detail}, true
}

// decodeCallError maps an error of verbs.Conn.Call back to the owner's
// *OwnerError (wrapping the *verbs.CallError) when the owner's handler
// failed with a structobj error; any other error is returned as is.
func decodeCallError(err error) error {
	var ce *verbs.CallError
	if err == nil || !errors.As(err, &ce) || ce.Status != verbs.StatusHandler {
		return err
	}
	oe, ok := parseOwnerError(ce.Message)
	if !ok {
		return err
	}
	oe.Call = ce
	return oe
}

// MessageError reports a message that could not be decoded: its name
// ("commit request"), the field at fault and why. It matches ErrProtocol.
type MessageError = proto.MessageError

// ConfigError reports an OwnerConfig field that NewOwner cannot use. It
// matches ErrConfig.
type ConfigError struct {
	Field, Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("structobj: owner config: %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

// ClientConfigError reports a ClientConfig field that NewClient cannot
// use. It matches ErrClientConfig.
type ClientConfigError struct {
	// Field is the ClientConfig field at fault; Reason says why.
	Field, Reason string
}

func (e *ClientConfigError) Error() string {
	return fmt.Sprintf("structobj: client config: %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrClientConfig.
func (e *ClientConfigError) Unwrap() error { return ErrClientConfig }
