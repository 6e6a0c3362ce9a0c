package planfmt

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// addSeeds adds every committed golden message matching pattern.
func addSeeds(f *testing.F, pattern string) {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "golden", pattern))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds for %s in testdata/golden (%v)", pattern, err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// repaired returns b with its length and checksum fields made to agree with
// its bytes, so mutations reach the checks behind them.
func repaired(b []byte) []byte {
	if len(b) < headerSize {
		return nil
	}
	c := append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(c[offLength:], uint32(len(c)))
	seal(c)
	return c
}

// requireDecodeError fails unless err is a *DecodeError wrapping a sentinel.
func requireDecodeError(t *testing.T, err error) {
	t.Helper()
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is not a *DecodeError", err, err)
	}
	if sentinelOf(err) == err {
		t.Fatalf("error %v wraps no sentinel", err)
	}
}

func FuzzDecodePlan(f *testing.F) {
	addSeeds(f, "plan-*.bin")
	var p Plan
	var n Normalized
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, msg := range [][]byte{b, repaired(b)} {
			if msg == nil {
				continue
			}
			err := DecodePlan(&p, msg)
			if err != nil {
				requireDecodeError(t, err)
				continue
			}
			again, err := AppendPlan(nil, &p)
			if err != nil {
				t.Fatalf("decoded plan does not re-encode: %v", err)
			}
			if string(again) != string(msg) {
				t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, msg)
			}
			if err := Normalize(&n, &p); err != nil {
				if p.Form != FormRanges || !errors.Is(err, ErrOverlap) {
					t.Fatalf("decoded plan fails Normalize with %v", err)
				}
				continue
			}
			n.ForEachSpan(func(_, _, _ uint64) bool { return true })
			n.ForEachRun(func(_, _, _ uint64) bool { return true })
		}
	})
}

func FuzzDecodeCommand(f *testing.F) {
	addSeeds(f, "command-*.bin")
	var c Command
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, msg := range [][]byte{b, repaired(b)} {
			if msg == nil {
				continue
			}
			err := DecodeCommand(&c, msg)
			if err != nil {
				requireDecodeError(t, err)
				continue
			}
			again, err := AppendCommand(nil, &c)
			if err != nil {
				t.Fatalf("decoded command does not re-encode: %v", err)
			}
			if string(again) != string(msg) {
				t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, msg)
			}
		}
	})
}
