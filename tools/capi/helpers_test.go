package main

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// newRand returns a generator from a fresh seed, logged for replay.
func newRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// cstr is s as a NUL-terminated C string in Go memory.
func cstr(s string) unsafe.Pointer {
	b := append([]byte(s), 0)
	return unsafe.Pointer(&b[0])
}

// cnames is sk_columns' names argument: each name NUL-terminated, back
// to back.
func cnames(names ...string) unsafe.Pointer {
	var b []byte
	for _, n := range names {
		b = append(append(b, n...), 0)
	}
	b = append(b, 0) // never empty
	return unsafe.Pointer(&b[0])
}

func ptr[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

type table struct {
	rows     int64
	rowBytes int
}

// configJSON is sk_open's config for tables in dir (local) or served at
// remote (a {"transport", "addr", ...} object).
func configJSON(t testing.TB, tables map[string]table, dir string, remote map[string]any) []byte {
	t.Helper()
	ts := map[string]any{}
	for name, tb := range tables {
		ts[name] = map[string]any{"num_rows": tb.rows, "row_bytes": tb.rowBytes}
	}
	cfg := map[string]any{"namespace": "ns", "tables": ts}
	if remote != nil {
		cfg["remote"] = remote
	} else {
		cfg["local_dir"] = dir
	}
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	return b
}

// openStore opens a store and closes it at cleanup (a second close
// fails SK_ECLOSED, which cleanup ignores).
func openStore(t *testing.T, cfg []byte) uint64 {
	t.Helper()
	h, err := open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { closeStore(h) })
	return h
}

// populated opens a local store of tables in a new directory and fills
// each with random rows, which it returns.
func populated(t *testing.T, r *rand.Rand, tables map[string]table) (uint64, map[string][]byte) {
	t.Helper()
	h := openStore(t, configJSON(t, tables, t.TempDir(), nil))
	rows := map[string][]byte{}
	for name, tb := range tables {
		rows[name] = randBytes(r, int(tb.rows)*tb.rowBytes)
		require.NoError(t, populate(h, name, ptr(rows[name]), int64(len(rows[name]))))
	}
	return h, rows
}

func newCols(t *testing.T, store uint64, names ...string) uint64 {
	t.Helper()
	h, err := newColumns(store, cnames(names...), int32(len(names)))
	require.NoError(t, err)
	return h
}

// refLookup writes what a lookup must write into out.
func refLookup(rows map[string][]byte, rowBytes int, names []string, ids []int64, T, K int, off, ts, ks int, offsets []int64, out []byte) {
	for t := range T {
		for k := range K {
			id := ids[t*K+k]
			if id == -1 {
				continue
			}
			if offsets != nil {
				id -= offsets[k]
			}
			at := off + t*ts + k*ks
			copy(out[at:at+rowBytes], rows[names[k]][int(id)*rowBytes:int(id+1)*rowBytes])
		}
	}
}

// poison fills b with a byte that no test row is likely to hold in full.
func poison(b []byte) { copy(b, bytes.Repeat([]byte{0xA5}, len(b))) }

// requireCode fails unless err maps to want.
func requireCode(t *testing.T, want code, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, want, classify(err), "error: %v", err)
}

// wildPointer is an address that is no Go memory (near the end of the
// address space, say), for arguments that must be refused unread.
func wildPointer(u uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&u)) }
