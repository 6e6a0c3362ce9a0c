package structobj

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// repairManifest returns a copy of b with its length and checksum fields
// made to agree with its bytes, so that mutations reach the checks behind
// them. A message shorter than the header is returned as is.
func repairManifest(b []byte) []byte {
	c := bytes.Clone(b)
	if len(c) < manifestHeaderSize {
		return c
	}
	binary.LittleEndian.PutUint32(c[manifestOffLength:], uint32(len(c)))
	binary.LittleEndian.PutUint32(c[manifestOffCRC:], 0)
	binary.LittleEndian.PutUint32(c[manifestOffCRC:], crc32.Checksum(c, manifestCRCTable))
	return c
}

func FuzzDecodeManifest(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "manifest-*.bin"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds in testdata (%v): run go test -run ManifestGolden -update", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	var dst, again Manifest
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, msg := range [][]byte{b, repairManifest(b)} {
			err := DecodeManifest(&dst, msg, Limits{})
			if err != nil {
				var we *WireError
				if !errors.Is(err, ErrManifestWire) || !errors.As(err, &we) {
					t.Fatalf("error %v (%T) is not a *WireError", err, err)
				}
				if we.Offset < 0 || we.Offset > len(msg) {
					t.Fatalf("offset %d outside the %d-byte message: %v", we.Offset, len(msg), err)
				}
				continue
			}
			if err := dst.Validate(Limits{}); err != nil {
				t.Fatalf("decoded manifest fails Validate: %v", err)
			}
			enc, err := AppendManifest(nil, &dst)
			if err != nil {
				t.Fatalf("decoded manifest does not re-encode: %v", err)
			}
			if !bytes.Equal(enc, msg) {
				t.Fatalf("re-encoding differs:\n got %x\nwant %x", enc, msg)
			}
			if err := DecodeManifest(&again, enc, Limits{}); err != nil {
				t.Fatalf("re-encoding does not decode: %v", err)
			}
			if d := diffManifests(&dst, &again); d != "" {
				t.Fatalf("decodes differ: %s", d)
			}
			for i := range dst.Members {
				mem := &dst.Members[i]
				// The data checks take any bytes without panicking.
				switch mem.Kind {
				case KindRagged:
					_ = mem.CheckRagged(msg[:min(len(msg), int(mem.Offsets.Length))], int64(mem.Data.Length)/int64(mem.DType.Size()))
				case KindSparseCOO:
					_ = mem.CheckSparse(msg[:min(len(msg), int(mem.Indices.Length))])
				}
			}
		}
	})
}
