package discovery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// The directory file format; see "# Format" in the package documentation.
const (
	fileFormatName    = "scatterkit-discovery"
	fileFormatVersion = 1
	maxFileSize       = 16 << 20
	maxBootIDLen      = 64
)

// fileDoc is the whole directory file.
type fileDoc struct {
	Format   string       `json:"format"`
	Version  int          `json:"version"`
	Revision int64        `json:"revision"` // the last revision handed out
	Records  []fileRecord `json:"records"`
}

// fileRecord is a record and the process that holds it.
type fileRecord struct {
	Record
	Holder holder `json:"holder"`
}

// holder identifies a live process across pid reuse and reboots, and one
// registration of it.
type holder struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // start time in clock ticks after boot (/proc/PID/stat field 22)
	Boot  string `json:"boot"`  // /proc/sys/kernel/random/boot_id
	PIDNS uint64 `json:"pidns"` // inode of /proc/PID/ns/pid
	ID    string `json:"id"`    // 16 lowercase hex digits, unique per registration
}

// sameProcess reports whether h and p name the same process.
func (h holder) sameProcess(p holder) bool {
	return h.PID == p.PID && h.Start == p.Start && h.Boot == p.Boot && h.PIDNS == p.PIDNS
}

func newFileDoc() *fileDoc {
	return &fileDoc{Format: fileFormatName, Version: fileFormatVersion}
}

// decodeFile decodes and checks a directory file. Empty data is an empty
// directory. Errors are *CorruptError naming src.
func decodeFile(src string, data []byte) (*fileDoc, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return newFileDoc(), nil
	}
	corrupt := func(reason string, err error) error {
		return &CorruptError{Source: src, Reason: reason, Err: err}
	}
	if len(data) > maxFileSize {
		return nil, corrupt(fmt.Sprintf("%d bytes, more than %d", len(data), maxFileSize), nil)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	doc := new(fileDoc)
	if err := dec.Decode(doc); err != nil {
		return nil, corrupt("bad JSON", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, corrupt("data after the JSON object", nil)
	}
	if doc.Format != fileFormatName {
		return nil, corrupt(fmt.Sprintf("format %q, want %q", doc.Format, fileFormatName), nil)
	}
	if doc.Version != fileFormatVersion {
		return nil, corrupt(fmt.Sprintf("version %d, this code reads %d", doc.Version, fileFormatVersion), nil)
	}
	if doc.Revision < 0 {
		return nil, corrupt("negative revision", nil)
	}
	if len(doc.Records) == 0 {
		doc.Records = nil
	}
	for i := range doc.Records {
		fr := &doc.Records[i]
		if err := fr.Validate(); err != nil {
			return nil, corrupt(fmt.Sprintf("record %d", i), err)
		}
		if fr.Revision <= 0 || fr.Revision > doc.Revision {
			return nil, corrupt(fmt.Sprintf("record %q: revision %d outside 1..%d", fr.Name, fr.Revision, doc.Revision), nil)
		}
		if reason := fr.Holder.check(); reason != "" {
			return nil, corrupt(fmt.Sprintf("record %q: holder %s", fr.Name, reason), nil)
		}
		if len(fr.Attrs) == 0 {
			fr.Attrs = nil
		}
		if !fr.Expires.IsZero() {
			fr.Expires = fr.Expires.UTC()
		}
	}
	slices.SortFunc(doc.Records, func(a, b fileRecord) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(doc.Records); i++ {
		if doc.Records[i].Name == doc.Records[i-1].Name {
			return nil, corrupt(fmt.Sprintf("name %q appears twice", doc.Records[i].Name), nil)
		}
	}
	return doc, nil
}

func (h holder) check() string {
	switch {
	case h.PID <= 0:
		return "pid not positive"
	case h.Boot == "" || len(h.Boot) > maxBootIDLen || textRule(h.Boot, maxBootIDLen) != "":
		return "bad boot id"
	case !validRegID(h.ID):
		return "id is not 16 lowercase hex digits"
	}
	return ""
}

func validRegID(s string) bool {
	if len(s) != 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func formatRegID(id uint64) string {
	s := strconv.FormatUint(id, 16)
	return strings.Repeat("0", 16-len(s)) + s
}

// encodeFile renders doc, records sorted by name, one field per line.
func encodeFile(doc *fileDoc) ([]byte, error) {
	sorted := *doc
	sorted.Records = slices.SortedFunc(slices.Values(doc.Records), func(a, b fileRecord) int { return strings.Compare(a.Name, b.Name) })
	if sorted.Records == nil {
		sorted.Records = []fileRecord{}
	}
	out, err := json.MarshalIndent(&sorted, "", "\t")
	if err != nil {
		return nil, fmt.Errorf("encode directory file: %w", err)
	}
	return append(out, '\n'), nil
}
