//go:build cuda

package cudaengram

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/scatterkit/scatterkit/cudagather"
	"github.com/scatterkit/scatterkit/engram"
)

func TestStoreOnDevice(t *testing.T) {
	c, err := cudagather.NewContext(0)
	if err != nil {
		if os.Getenv("REQUIRE_CUDA") == "1" {
			t.Fatalf("REQUIRE_CUDA=1: %v", err)
		}
		t.Skipf("no CUDA device: %v", err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	if err := c.Warmup(0); err != nil {
		t.Fatal(err)
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	spec := engram.TableSpec{NumRows: 20000, RowBytes: 264}
	s, err := engram.Open(context.Background(), engram.Config{
		Tables: map[string]engram.TableSpec{"ngram2": spec, "ngram3": spec}, Namespace: "gpu", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, name := range []string{"ngram2", "ngram3"} {
		rows := make([]byte, spec.Size())
		for i := range rows {
			rows[i] = byte(r.Uint32() | 1)
		}
		if err := s.Populate(name, rows); err != nil {
			t.Fatal(err)
		}
	}
	const T, K, R = 64, 24, 264
	tables := make([]string, K)
	for k := range tables {
		tables[k] = []string{"ngram2", "ngram3"}[k%2]
	}
	ids := make([]int64, T*K)
	for i := range ids {
		ids[i] = r.Int64N(spec.NumRows)
		if i%17 == 0 {
			ids[i] = -1
		}
	}
	idb := make([]byte, 8*len(ids))
	for i, v := range ids {
		binary.LittleEndian.PutUint64(idb[8*i:], uint64(v))
	}
	want := bytes.Repeat([]byte{0x3C}, T*K*R)
	if err := s.Lookup(tables, engram.IDs64(ids, T, K), engram.HeadMajor(want, T, K, R), nil); err != nil {
		t.Fatal(err)
	}
	for _, host := range []bool{true, false} {
		dt, err := s.AttachDevice(c, engram.DeviceOptions{Host: host})
		if err != nil {
			t.Fatal(err)
		}
		idp, _ := c.Alloc(int64(len(idb)))
		out, _ := c.Alloc(T * K * R)
		if err := c.CopyIn(idp, idb); err != nil {
			t.Fatal(err)
		}
		if err := c.CopyIn(out, bytes.Repeat([]byte{0x3C}, T*K*R)); err != nil {
			t.Fatal(err)
		}
		if err := dt.Lookup(0, tables, uintptr(idp), true, T, K, uintptr(out), T*K*R, 0, R, T*R, nil); err != nil {
			t.Fatal(err)
		}
		if err := c.Status(0, K); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, T*K*R)
		if err := c.CopyOut(got, out); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("host=%v: device lookup differs from the store's CPU lookup", host)
		}
		_ = c.Free(idp)
		_ = c.Free(out)
		if err := dt.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
