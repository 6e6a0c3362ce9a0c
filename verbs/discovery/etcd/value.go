package etcd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/scatterkit/scatterkit/verbs/discovery"
)

// maxValueSize bounds a stored value; a record within the discovery limits
// encodes to well under it.
const maxValueSize = 256 << 10

// encodeValue renders the value stored under a record's key: the record
// without its Revision (etcd's ModRevision is the revision).
func encodeValue(r discovery.Record) ([]byte, error) {
	r.Revision = 0
	out, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("discovery/etcd: encode record %q: %w", r.Name, err)
	}
	return out, nil
}

// decodeValue decodes the value stored under key for the record name and
// gives it revision rev. Errors are *discovery.CorruptError naming key.
func decodeValue(key, name string, value []byte, rev int64) (discovery.Record, error) {
	corrupt := func(reason string, err error) error {
		return &discovery.CorruptError{Source: key, Reason: reason, Err: err}
	}
	if len(value) > maxValueSize {
		return discovery.Record{}, corrupt(fmt.Sprintf("%d bytes, more than %d", len(value), maxValueSize), nil)
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	var r discovery.Record
	if err := dec.Decode(&r); err != nil {
		return discovery.Record{}, corrupt("bad JSON", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return discovery.Record{}, corrupt("data after the JSON object", nil)
	}
	if r.Revision != 0 {
		return discovery.Record{}, corrupt("value carries a revision", nil)
	}
	if r.Name != name {
		return discovery.Record{}, corrupt(fmt.Sprintf("record name %q under the key of %q", r.Name, name), nil)
	}
	if err := r.Validate(); err != nil {
		return discovery.Record{}, corrupt("invalid record", err)
	}
	if rev <= 0 {
		return discovery.Record{}, corrupt(fmt.Sprintf("revision %d", rev), nil)
	}
	r.Revision = rev
	if len(r.Attrs) == 0 {
		r.Attrs = nil
	}
	if !r.Expires.IsZero() {
		r.Expires = r.Expires.UTC()
	}
	return r, nil
}
