package discovery

import (
	"fmt"
	"maps"
	"os"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits of the naming and record rules.
const (
	MaxNameLen      = 255  // bytes in a name or prefix
	MaxTransportLen = 32   // bytes in Record.Transport
	MaxAddrLen      = 1024 // bytes in Record.Addr
	MaxOwnerLen     = 256  // bytes in Record.Owner
	MaxAttrs        = 64   // entries in Record.Attrs
	MaxAttrKeyLen   = 128  // bytes in an attribute key
	MaxAttrValueLen = 1024 // bytes in an attribute value
)

// Record says how to reach one segment: the exported set of registered memory
// regions of one owner.
type Record struct {
	// Name of the segment; see the naming rules in the package documentation.
	Name string `json:"name"`
	// Transport that serves the segment: "shm", "tcp", ... Lowercase letters,
	// digits and '+', '.', '-', starting with a letter or digit.
	Transport string `json:"transport"`
	// Addr is the transport address (a socket address, a path). Required.
	Addr string `json:"addr"`
	// Owner is free text naming the owner. Publish fills DefaultOwner() when
	// it is empty.
	Owner string `json:"owner,omitempty"`
	// Revision is assigned by the directory on Publish (any value the
	// publisher sets is ignored). It grows with every publication in one
	// directory store, so a record published again has a new revision.
	Revision int64 `json:"revision,omitempty"`
	// Attrs are optional key/value pairs for the transport (region keys,
	// queue depth...). Publish and every read copy the map.
	Attrs map[string]string `json:"attrs,omitempty"`
	// Expires, when not zero, is when the record stops being valid even
	// though its owner lives: from then on reads do not see it and its name
	// can be published again. Zero means the record lives until withdrawn or
	// until its owner dies.
	Expires time.Time `json:"expires,omitzero"`
}

// Clone returns a copy of r that shares no memory with it.
func (r Record) Clone() Record {
	if r.Attrs != nil {
		r.Attrs = maps.Clone(r.Attrs)
	}
	return r
}

// Expired reports whether r has an Expires time at or before now.
func (r Record) Expired(now time.Time) bool {
	return !r.Expires.IsZero() && !now.Before(r.Expires)
}

// Validate checks r against the naming and record rules. It does not look at
// Revision or compare Expires with the clock; PreparePublish does that. The
// error is a *NameError or a *RecordError.
func (r Record) Validate() error {
	if err := ValidateName(r.Name); err != nil {
		return err
	}
	if reason := transportRule(r.Transport); reason != "" {
		return &RecordError{Name: r.Name, Field: "Transport", Reason: reason}
	}
	if r.Addr == "" {
		return &RecordError{Name: r.Name, Field: "Addr", Reason: "empty"}
	}
	if reason := textRule(r.Addr, MaxAddrLen); reason != "" {
		return &RecordError{Name: r.Name, Field: "Addr", Reason: reason}
	}
	if reason := textRule(r.Owner, MaxOwnerLen); reason != "" {
		return &RecordError{Name: r.Name, Field: "Owner", Reason: reason}
	}
	if r.Revision < 0 {
		return &RecordError{Name: r.Name, Field: "Revision", Reason: "negative"}
	}
	if y := r.Expires.UTC().Year(); !r.Expires.IsZero() && (y < 1 || y > 9999) {
		return &RecordError{Name: r.Name, Field: "Expires", Reason: fmt.Sprintf("year %d outside 1..9999", y)}
	}
	if len(r.Attrs) > MaxAttrs {
		return &RecordError{Name: r.Name, Field: "Attrs", Reason: fmt.Sprintf("%d entries, more than %d", len(r.Attrs), MaxAttrs)}
	}
	for k, v := range r.Attrs {
		if reason := attrKeyRule(k); reason != "" {
			return &RecordError{Name: r.Name, Field: fmt.Sprintf("Attrs[%q]", k), Reason: "key " + reason}
		}
		if reason := textRule(v, MaxAttrValueLen); reason != "" {
			return &RecordError{Name: r.Name, Field: fmt.Sprintf("Attrs[%q]", k), Reason: "value " + reason}
		}
	}
	return nil
}

// PreparePublish validates r for publication at time now and returns the copy
// a directory stores: Revision cleared (the directory assigns it), Owner
// defaulted to DefaultOwner(), Attrs copied (nil when empty), Expires in UTC
// without a monotonic reading. A record whose Expires is not after now is
// refused. Directory implementations call it first in Publish.
func PreparePublish(r Record, now time.Time) (Record, error) {
	if err := r.Validate(); err != nil {
		return Record{}, err
	}
	if !r.Expires.IsZero() && !r.Expires.After(now) {
		return Record{}, &RecordError{Name: r.Name, Field: "Expires", Reason: "not in the future"}
	}
	r.Revision = 0
	if r.Owner == "" {
		r.Owner = DefaultOwner()
	}
	if len(r.Attrs) == 0 {
		r.Attrs = nil
	} else {
		r.Attrs = maps.Clone(r.Attrs)
	}
	if !r.Expires.IsZero() {
		r.Expires = r.Expires.Round(0).UTC()
	}
	return r, nil
}

// ValidateName checks a record name against the naming rules; the error is a
// *NameError.
func ValidateName(name string) error {
	if name == "" {
		return &NameError{Name: name, Reason: "empty"}
	}
	if len(name) > MaxNameLen {
		return &NameError{Name: name, Reason: fmt.Sprintf("%d bytes, more than %d", len(name), MaxNameLen)}
	}
	if name[len(name)-1] == '/' {
		return &NameError{Name: name, Reason: "ends with '/'"}
	}
	return nameChars(name)
}

// ValidatePrefix checks a name prefix for List and Watch: empty (everything),
// or the beginning of some valid name. The error is a *NameError.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if len(prefix) > MaxNameLen {
		return &NameError{Name: prefix, Reason: fmt.Sprintf("%d bytes, more than %d", len(prefix), MaxNameLen)}
	}
	return nameChars(prefix)
}

// nameChars checks the charset and the segment rule shared by names and
// prefixes: every '/'-separated segment starts with a letter or a digit.
func nameChars(s string) error {
	segStart := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isAlnum(c):
		case c == '.' || c == '_' || c == '-' || c == ':':
			if segStart {
				return &NameError{Name: s, Reason: fmt.Sprintf("segment starts with %q at byte %d", c, i)}
			}
		case c == '/':
			if segStart {
				return &NameError{Name: s, Reason: fmt.Sprintf("empty segment at byte %d", i)}
			}
			segStart = true
			continue
		default:
			return &NameError{Name: s, Reason: fmt.Sprintf("byte %#02x at %d is not in [A-Za-z0-9._:/-]", c, i)}
		}
		segStart = false
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func transportRule(s string) string {
	if s == "" {
		return "empty"
	}
	if len(s) > MaxTransportLen {
		return fmt.Sprintf("%d bytes, more than %d", len(s), MaxTransportLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		lowerOrDigit := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !lowerOrDigit && (i == 0 || c != '+' && c != '.' && c != '-') {
			return fmt.Sprintf("byte %#02x at %d is not allowed (lowercase letters, digits, '+', '.', '-')", c, i)
		}
	}
	return ""
}

func attrKeyRule(s string) string {
	if s == "" {
		return "empty"
	}
	if len(s) > MaxAttrKeyLen {
		return fmt.Sprintf("%d bytes, more than %d", len(s), MaxAttrKeyLen)
	}
	if !isAlnum(s[0]) {
		return "does not start with a letter or digit"
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '.' && c != '_' && c != '-' && c != ':' && c != '/' {
			return fmt.Sprintf("byte %#02x at %d is not in [A-Za-z0-9._:/-]", c, i)
		}
	}
	return ""
}

// textRule accepts valid UTF-8 of at most max bytes without control
// characters.
func textRule(s string, max int) string {
	if len(s) > max {
		return fmt.Sprintf("%d bytes, more than %d", len(s), max)
	}
	for i, c := range s {
		if c == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size <= 1 {
				return fmt.Sprintf("invalid UTF-8 at byte %d", i)
			}
		}
		if unicode.IsControl(c) {
			return fmt.Sprintf("control character %U at byte %d", c, i)
		}
	}
	return ""
}

// DefaultOwner returns the Owner text Publish fills in when a record has
// none: "host/pid" of this process.
func DefaultOwner() string { return defaultOwner() }

var defaultOwner = sync.OnceValue(func() string {
	host, err := os.Hostname()
	if err != nil || textRule(host, MaxOwnerLen-21) != "" || host == "" {
		host = "localhost"
	}
	return host + "/" + strconv.Itoa(os.Getpid())
})

// EventKind says what happened to a record in a Watch.
type EventKind uint8

const (
	// EventPut: the record appeared, or replaced the one last reported under
	// its name (a new Revision).
	EventPut EventKind = iota + 1
	// EventDelete: the record is gone (withdrawn, expired, or its owner died).
	EventDelete
)

func (k EventKind) String() string {
	switch k {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one change a Watch reports. For EventDelete, Record is the record
// last reported under the name.
type Event struct {
	Kind   EventKind
	Record Record
}
