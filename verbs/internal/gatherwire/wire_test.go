package gatherwire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/scatterkit/scatterkit/verbs"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

var updateWireSeeds = flag.Bool("gatherwire.update-seeds", false, "rewrite testdata/fuzz/FuzzGatherWire seeds")

func sampleInfo() OwnerInfo {
	return OwnerInfo{BMem: 9.5e9, RCopy: 12.25e6, PackWorkers: 2, MaxSlots: 8, StagingBudget: 32 << 20,
		MinChunk: 64 << 10, MaxChunk: 16 << 20, InlineMax: 256 << 10, ParallelMin: 512 << 10, Exposed: []verbs.RegionInfo{
			{Key: 0x1122334455667788, Len: 1 << 20, Access: verbs.AccessLocal | verbs.AccessRemoteWrite},
			{Key: 0x0102030405060708, Len: 4096, Access: verbs.AccessRemoteRead}}}
}

func sampleReply() Stats {
	return Stats{Dir: verbs.OpRead, Decode: 310 * time.Microsecond, Pack: 12 * time.Millisecond,
		Window: 14 * time.Millisecond, Handler: 15 * time.Millisecond, Fill: 900 * time.Microsecond,
		Payload: 25952256, Peak: 4 << 20, Chunk: 512 << 10, Chunks: 50, Slots: 8, Workers: 2}
}

func TestInfoRoundTrip(t *testing.T) {
	in := sampleInfo()
	b := AppendInfo([]byte("prefix"), &in)
	require.Equal(t, "prefix", string(b[:6]))
	require.Len(t, b, 6+infoFixedSize+2*infoEntrySize)
	var out OwnerInfo
	require.NoError(t, DecodeInfo(&out, b[6:]))
	require.Empty(t, cmp.Diff(in, out))
	require.True(t, out.Covers(0x1122334455667788, verbs.AccessRemoteWrite, 1<<20))
	require.False(t, out.Covers(0x1122334455667788, verbs.AccessRemoteWrite, 1<<20+1))
	require.False(t, out.Covers(0x0102030405060708, verbs.AccessRemoteWrite, 1))
}

func TestReplyRoundTrip(t *testing.T) {
	in := sampleReply()
	b := AppendReply(nil, &in)
	require.Len(t, b, ReplySize)
	var out Stats
	require.NoError(t, DecodeReply(&out, b))
	require.Equal(t, in, out)

	// An inline reply: the record, then exactly payload bytes.
	in = Stats{Dir: verbs.OpRead, Inline: true, Payload: 5, Chunks: 1, Chunk: 5, Workers: 1}
	b = append(AppendReply(nil, &in), 1, 2, 3, 4, 5)
	require.Equal(t, byte(replyInline), b[6])
	out = Stats{}
	require.NoError(t, DecodeReply(&out, b))
	require.Equal(t, in, out)
}

func TestWireRejects(t *testing.T) {
	info := sampleInfo()
	good := AppendInfo(nil, &info)
	rs := sampleReply()
	goodReply := AppendReply(nil, &rs)
	edit := func(src []byte, fn func(b []byte) []byte) []byte { return fn(bytes.Clone(src)) }
	f64 := func(off int, v float64) func([]byte) []byte {
		return func(b []byte) []byte { binary.LittleEndian.PutUint64(b[off:], math.Float64bits(v)); return b }
	}
	u64 := func(off int, v uint64) func([]byte) []byte {
		return func(b []byte) []byte { binary.LittleEndian.PutUint64(b[off:], v); return b }
	}
	for _, tc := range []struct {
		name  string
		reply bool
		msg   []byte
		field string
	}{
		{"info-short", false, good[:infoFixedSize-1], "length"},
		{"info-magic", false, edit(good, func(b []byte) []byte { b[0] = 'X'; return b }), "magic"},
		{"info-version", false, edit(good, func(b []byte) []byte { b[4] = 1; return b }), "version"},
		{"info-inline-too-large", false, edit(good, u64(56, MaxInlineReply+1)), "inline"},
		{"info-reserved", false, edit(good, func(b []byte) []byte { b[5] = 1; return b }), "reserved"},
		{"info-count-long", false, edit(good, func(b []byte) []byte { b[6] = 3; return b }), "count"},
		{"info-trailing", false, append(bytes.Clone(good), 0), "count"},
		{"info-nan-bmem", false, edit(good, f64(8, math.NaN())), "BMem"},
		{"info-inf-rcopy", false, edit(good, f64(16, math.Inf(1))), "RCopy"},
		{"info-zero-budget", false, edit(good, u64(24, 0)), "staging"},
		{"info-chunk-over-budget", false, edit(good, u64(32, 64<<20)), "staging"},
		{"info-zero-slots", false, edit(good, func(b []byte) []byte { binary.LittleEndian.PutUint32(b[48:], 0); return b }), "workers"},
		{"info-bad-access", false, edit(good, func(b []byte) []byte { b[infoFixedSize+16] = 0x80; return b }), "exposure"},
		{"info-entry-reserved", false, edit(good, func(b []byte) []byte { b[infoFixedSize+20] = 1; return b }), "exposure"},
		{"reply-short", true, goodReply[:ReplySize-1], "length"},
		{"reply-magic", true, edit(goodReply, func(b []byte) []byte { b[1] = 'x'; return b }), "magic"},
		{"reply-version", true, edit(goodReply, func(b []byte) []byte { b[4] = 9; return b }), "version"},
		{"reply-direction", true, edit(goodReply, func(b []byte) []byte { b[5] = 3; return b }), "direction"},
		{"reply-reserved", true, edit(goodReply, func(b []byte) []byte { b[7] = 1; return b }), "reserved"},
		{"reply-tail-reserved", true, edit(goodReply, func(b []byte) []byte { b[87] = 1; return b }), "reserved"},
		{"reply-negative", true, edit(goodReply, u64(16, 1<<63)), "duration"},
		{"reply-flags", true, edit(goodReply, func(b []byte) []byte { b[6] = 2; return b }), "reserved"},
		{"reply-not-inline-longer", true, append(edit(goodReply, func(b []byte) []byte { return b }), 0), "length"},
		{"reply-inline-short", true, edit(goodReply, func(b []byte) []byte { b[6] = replyInline; return b }), "length"},
		{"reply-inline-write", true, edit(goodReply, func(b []byte) []byte { b[5], b[6] = byte(verbs.OpWrite), replyInline; return b }), "flags"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.reply {
				s := Stats{Chunks: 77}
				err = DecodeReply(&s, tc.msg)
				require.Equal(t, uint32(77), s.Chunks, "destination changed on error")
			} else {
				o := OwnerInfo{MaxSlots: 77}
				err = DecodeInfo(&o, tc.msg)
				require.Equal(t, 77, o.MaxSlots, "destination changed on error")
			}
			var we *WireError
			require.ErrorAs(t, err, &we)
			require.Equal(t, tc.field, we.Field)
			require.ErrorIs(t, err, verbs.ErrProtocol)
		})
	}
}

func TestGatherErrorText(t *testing.T) {
	for _, code := range []GatherCode{GatherRefused, GatherExhausted, GatherAborted} {
		err := &GatherError{Code: code, Stage: "stage", Err: errors.New("cause")}
		got, ok := ParseGatherCode(err.Error())
		require.True(t, ok, err.Error())
		require.Equal(t, code, got)
	}
	_, ok := ParseGatherCode("verbs: gather refusedx")
	require.False(t, ok)
	_, ok = ParseGatherCode("something else")
	require.False(t, ok)
	require.ErrorIs(t, &GatherError{Code: GatherExhausted, Err: errors.New("x")}, verbs.ErrStagingExhausted)
	require.ErrorIs(t, &GatherError{Code: GatherRefused, Err: verbs.ErrBounds}, verbs.ErrBounds)
	require.Equal(t, "GatherCode(9)", GatherCode(9).String())
}

// FuzzGatherWire decodes arbitrary info and reply messages: the decoders
// must not panic, and whatever they accept must re-encode to the same
// bytes (the encodings are canonical).
func FuzzGatherWire(f *testing.F) {
	dir := filepath.Join("testdata", "fuzz", "FuzzGatherWire")
	if *updateWireSeeds {
		require.NoError(f, os.MkdirAll(dir, 0o755))
		info, reply := sampleInfo(), sampleReply()
		for name, b := range map[string][]byte{
			"info":     append([]byte{0}, AppendInfo(nil, &info)...),
			"reply":    append([]byte{1}, AppendReply(nil, &reply)...),
			"info-bad": append([]byte{0}, "SKGI\x01\x00\x00\x00"...),
		} {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
			require.NoError(f, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		msg := data[1:]
		if data[0]&1 == 0 {
			var o OwnerInfo
			if DecodeInfo(&o, msg) == nil {
				require.Equal(t, msg, AppendInfo(nil, &o))
			}
			return
		}
		var s Stats
		if DecodeReply(&s, msg) == nil {
			require.Equal(t, msg, AppendReply(nil, &s))
		}
	})
}
