package owner

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPackRequestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  PackRequest
	}{
		{"load", PackRequest{Op: PackLoad, PlanID: 7, Plan: []byte("SKPL-not-decoded-here")}},
		{"run", PackRequest{Op: PackRun, PlanID: 1 << 60, Chunk: 1 << 20, Reps: MaxPackReps}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := AppendPackRequest([]byte("prefix"), &tc.req)
			require.Equal(t, "prefix", string(b[:6]))
			var got PackRequest
			require.NoError(t, DecodePackRequest(&got, b[6:]))
			require.Equal(t, tc.req, got)
		})
	}
}

func TestPackRequestRejects(t *testing.T) {
	run := AppendPackRequest(nil, &PackRequest{Op: PackRun, PlanID: 3, Chunk: 4096, Reps: 2})
	load := AppendPackRequest(nil, &PackRequest{Op: PackLoad, PlanID: 3, Plan: []byte{1}})
	edit := func(b []byte, f func([]byte)) []byte {
		c := append([]byte(nil), b...)
		f(c)
		return c
	}
	for _, tc := range []struct {
		name  string
		b     []byte
		field string
	}{
		{"empty", nil, "length"},
		{"short", run[:15], "length"},
		{"magic", edit(run, func(b []byte) { b[0] = 'X' }), "magic"},
		{"version", edit(run, func(b []byte) { b[4] = 2 }), "version"},
		{"reserved header", edit(run, func(b []byte) { b[7] = 1 }), "reserved"},
		{"zero id", edit(run, func(b []byte) { clear(b[8:16]) }), "plan id"},
		{"unknown op", edit(run, func(b []byte) { b[5] = 9 }), "op"},
		{"load without plan", load[:16], "plan"},
		{"run too long", append(append([]byte(nil), run...), 0), "length"},
		{"run too short", run[:31], "length"},
		{"run reserved", edit(run, func(b []byte) { b[31] = 1 }), "reserved"},
		{"zero chunk", edit(run, func(b []byte) { clear(b[16:24]) }), "chunk"},
		{"zero reps", edit(run, func(b []byte) { clear(b[24:28]) }), "reps"},
		{"too many reps", edit(run, func(b []byte) { binary.LittleEndian.PutUint32(b[24:], MaxPackReps+1) }), "reps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := PackRequest{PlanID: 42}
			err := DecodePackRequest(&r, tc.b)
			require.ErrorIs(t, err, ErrControl)
			var ce *ControlError
			require.True(t, errors.As(err, &ce))
			require.Equal(t, tc.field, ce.Field)
			require.Equal(t, uint64(42), r.PlanID, "a rejected request changes nothing")
		})
	}
}

func TestPackReply(t *testing.T) {
	in := PackReply{Workers: 2, Times: []time.Duration{time.Millisecond, 3 * time.Microsecond}}
	b := AppendPackReply(nil, PackRun, &in)
	var out PackReply
	require.NoError(t, DecodePackReply(&out, PackRun, b))
	require.Equal(t, in, out)
	require.ErrorIs(t, DecodePackReply(&out, PackRun, b[:len(b)-1]), ErrControl)
	require.ErrorIs(t, DecodePackReply(&out, PackRun, b[:4]), ErrControl)
	zero := append([]byte(nil), b[:8]...)
	binary.LittleEndian.PutUint32(zero[4:], 0)
	require.ErrorIs(t, DecodePackReply(&out, PackRun, zero), ErrControl)

	ld := AppendPackReply(nil, PackLoad, &PackReply{Payload: 99, Fragments: 3})
	require.NoError(t, DecodePackReply(&out, PackLoad, ld))
	require.Equal(t, uint64(99), out.Payload)
	require.Equal(t, uint64(3), out.Fragments)
	require.ErrorIs(t, DecodePackReply(&out, PackLoad, ld[:15]), ErrControl)
}

func TestStatsEncoding(t *testing.T) {
	in := Stats{Leases: 1, InUse: 2, Peak: 3, Budget: 4, Commands: 5, Failed: 6}
	got, err := DecodeStats(AppendStats(nil, in))
	require.NoError(t, err)
	require.Equal(t, in, got)
	_, err = DecodeStats(make([]byte, 47))
	require.ErrorIs(t, err, ErrControl)
}

// FuzzDecodePackRequest feeds arbitrary bytes to the decoder: it must not
// panic, must reject or accept without touching the output on rejection,
// and what it accepts must re-encode to the same bytes. Seeds live in
// testdata/fuzz/FuzzDecodePackRequest.
func FuzzDecodePackRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		r := PackRequest{PlanID: 1234}
		if err := DecodePackRequest(&r, b); err != nil {
			if r.PlanID != 1234 || r.Op != 0 || r.Plan != nil {
				t.Fatalf("rejected request changed the output: %+v", r)
			}
			return
		}
		if got := AppendPackRequest(nil, &r); string(got) != string(b) {
			t.Fatalf("accepted %x but re-encodes to %x", b, got)
		}
	})
}
