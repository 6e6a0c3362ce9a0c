//go:build cuda

package cudagather

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestCopyDevice2D: random batches of strided device-to-device copies
// (plain, 2-D, pitches equal to and larger than the width) equal the
// host reference, bytes outside them untouched.
func TestCopyDevice2D(t *testing.T) {
	r := newRand(t)
	s, err := testCtx.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer testCtx.DestroyStream(s)
	const n = 1 << 20
	src := randBytes(r, n)
	poison := randBytes(r, n)
	sp, dp := devBytes(t, src), devBytes(t, poison)
	for round := range 20 {
		want := bytes.Clone(poison)
		if err := testCtx.CopyIn(dp, poison); err != nil {
			t.Fatal(err)
		}
		var cs []DeviceCopy
		dstAt := int64(0)
		for range 1 + r.IntN(8) {
			w := 1 + r.Int64N(300)
			rows := 1 + r.Int64N(40)
			spitch, dpitch := w+r.Int64N(3)*r.Int64N(100), w+r.Int64N(2)*r.Int64N(64)
			so := r.Int64N(n - (rows-1)*spitch - w)
			do := dstAt
			end := do + (rows-1)*dpitch + w
			if end > n {
				break
			}
			dstAt = end + r.Int64N(64) // the copies' destinations do not overlap
			cs = append(cs, DeviceCopy{Dst: dp + DevPtr(do), Src: sp + DevPtr(so), DstPitch: dpitch, SrcPitch: spitch, Width: w, Rows: rows})
			for k := range rows {
				copy(want[do+k*dpitch:do+k*dpitch+w], src[so+k*spitch:])
			}
		}
		if err := testCtx.CopyDevice2D(s, cs); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := testCtx.Sync(s); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, n)
		if err := testCtx.CopyOut(got, dp); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d: device bytes differ from the host reference", round)
		}
	}
	if err := testCtx.CopyDevice2D(s, []DeviceCopy{{Dst: dp, Src: sp, Width: 8, Rows: 2, DstPitch: 4, SrcPitch: 8}}); err == nil {
		t.Fatal("a pitch below the width was accepted")
	}
}

// TestIPC: a second process (this test binary, TestIPCChild) opens this
// process's device allocation by its IPC handle, reads its first half
// with a strided copy into memory of its own and writes its second half
// from there; this side sees the written half, and the child's digest of
// what it read matches.
func TestIPC(t *testing.T) {
	if os.Getenv("SK_IPC_CHILD") != "" {
		t.Skip("the child's side runs in TestIPCChild")
	}
	r := newRand(t)
	const n = 1 << 16
	data := randBytes(r, n)
	p := devBytes(t, data)
	h, err := testCtx.ExportIPC(p)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestIPCChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "SK_IPC_CHILD="+hex.EncodeToString(h[:]), "SK_IPC_LEN="+strconv.Itoa(n))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	sum := sha256.Sum256(data[:n/2])
	if !strings.Contains(string(out), "digest "+hex.EncodeToString(sum[:])) {
		t.Fatalf("child read other bytes:\n%s", out)
	}
	got := make([]byte, n)
	if err := testCtx.CopyOut(got, p); err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(data)
	for i := n / 2; i < n; i++ {
		want[i] = byte(i * 7)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the child's writes did not land in this process's allocation")
	}
}

// TestIPCChild is TestIPC's second process (skipped unless SK_IPC_CHILD
// holds a handle).
func TestIPCChild(t *testing.T) {
	hs := os.Getenv("SK_IPC_CHILD")
	if hs == "" {
		t.Skip("run by TestIPC")
	}
	n, _ := strconv.Atoi(os.Getenv("SK_IPC_LEN"))
	b, err := hex.DecodeString(hs)
	if err != nil || len(b) != len(IPCHandle{}) || n <= 0 {
		t.Fatalf("handle %q, length %d: %v", hs, n, err)
	}
	var h IPCHandle
	copy(h[:], b)
	peer, err := testCtx.OpenIPC(h)
	if err != nil {
		t.Fatal(err)
	}
	defer testCtx.CloseIPC(peer)
	s, err := testCtx.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer testCtx.DestroyStream(s)
	mine := devBytes(t, make([]byte, n))
	// Read the first half as 64 rows into a pitch of twice the width, then
	// write the second half of the peer's allocation from a pattern here.
	w := int64(n / 2 / 64)
	pattern := make([]byte, n/2)
	for i := range pattern {
		pattern[i] = byte((n/2 + i) * 7)
	}
	pat := devBytes(t, pattern)
	cs := []DeviceCopy{
		{Dst: mine, Src: peer, DstPitch: 2 * w, SrcPitch: w, Width: w, Rows: 64},
		{Dst: peer + DevPtr(n/2), Src: pat, Width: int64(n / 2), Rows: 1},
	}
	if err := testCtx.CopyDevice2D(s, cs); err != nil {
		t.Fatal(err)
	}
	if err := testCtx.Sync(s); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := testCtx.CopyOut(got, mine); err != nil {
		t.Fatal(err)
	}
	read := make([]byte, 0, n/2)
	for k := range int64(64) {
		read = append(read, got[2*w*k:2*w*k+w]...)
	}
	sum := sha256.Sum256(read)
	fmt.Printf("digest %s\n", hex.EncodeToString(sum[:]))
}
