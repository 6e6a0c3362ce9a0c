package proto

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testLimits are manifest limits an Info reply may carry.
var testLimits = ManifestLimits{MaxMembers: 1 << 16, MaxDims: 32, MaxMeta: 1024, MaxMetaBytes: 1 << 20, MaxBytes: MaxManifestBytes}

// testWireLimits are small, so tests and the fuzzers reach them.
var testWireLimits = Limits{Manifest: 1 << 12, Inline: 1 << 14}

// newMessage returns an empty message of a header kind (nil: none).
func newMessage(k byte) Message {
	reply := k&replyBit != 0
	method := uint16(k&^replyBit) + methodBase
	switch {
	case method == MethodInfo && reply:
		return new(InfoReply)
	case method == MethodInfo:
		return &EmptyRequest{Method: method}
	case method == MethodReserve && reply:
		return new(ReserveReply)
	case method == MethodReserve:
		return new(ReserveRequest)
	case method == MethodCommit && reply, method == MethodDelete && reply, method == MethodPutInline && reply:
		return &VersionReply{Method: method}
	case method == MethodCommit:
		return new(CommitRequest)
	case method == MethodAbort && reply, method == MethodClose && reply:
		return &EmptyReply{Method: method}
	case method == MethodAbort, method == MethodClose:
		return &IDRequest{Method: method}
	case method == MethodOpen && reply:
		return new(OpenReply)
	case method == MethodOpen, method == MethodDelete:
		return &KeyRequest{Method: method}
	case method == MethodPutInline:
		return new(PutInlineRequest)
	case method == MethodGetInline && reply:
		return new(GetInlineReply)
	case method == MethodGetInline:
		return new(GetInlineRequest)
	}
	return nil
}

// sampleMessages are valid messages of every kind, named.
func sampleMessages() map[string]Message {
	key := []byte("layer3/shard-0.bin")
	man := bytes.Repeat([]byte{0xa5}, 100)
	return map[string]Message{
		"info request": &EmptyRequest{Method: MethodInfo},
		"info reply": &InfoReply{Arena: 1 << 30, MaxInline: 8 << 20, ReserveTTL: 30 * time.Second, HoldTTL: time.Minute,
			Gather: true, Limits: testLimits, Region: RegionName, Namespace: "jobs/7"},
		"info reply minimal": &InfoReply{Arena: 64, ReserveTTL: 1, HoldTTL: MaxTTL,
			Limits: ManifestLimits{MaxMembers: 1, MaxDims: 1, MaxMeta: 1, MaxMetaBytes: 1, MaxBytes: 1}, Region: "r"},
		"reserve request":      &ReserveRequest{Size: 12345},
		"reserve request zero": &ReserveRequest{},
		"reserve reply":        &ReserveReply{ID: 7, Off: 4096, Length: 12352, TTL: time.Second},
		"commit request":       &CommitRequest{ID: 7, Key: key, Manifest: man},
		"commit reply":         &VersionReply{Method: MethodCommit, Version: 3},
		"abort request":        &IDRequest{Method: MethodAbort, ID: 7},
		"abort reply":          &EmptyReply{Method: MethodAbort},
		"open request":         &KeyRequest{Method: MethodOpen, Key: key},
		"open reply":           &OpenReply{Hold: 9, Version: 3, Off: 4096, TTL: time.Minute, Manifest: man},
		"close request":        &IDRequest{Method: MethodClose, ID: 9},
		"close reply":          &EmptyReply{Method: MethodClose},
		"delete request":       &KeyRequest{Method: MethodDelete, Key: key},
		"delete reply":         &VersionReply{Method: MethodDelete, Version: 3},
		"put-inline request":   &PutInlineRequest{Key: key, Manifest: man, Payload: []byte("payload bytes")},
		"put-inline reply":     &VersionReply{Method: MethodPutInline, Version: 4},
		"get-inline request":   &GetInlineRequest{Key: key, Ranges: []ByteRange{{0, 5}, {100, 1}, {7, 3}}},
		"get-inline whole":     &GetInlineRequest{Key: key},
		"get-inline reply":     &GetInlineReply{Version: 4, Manifest: man, Data: []byte("abcdefghi")},
	}
}

func TestProtoRoundTrip(t *testing.T) {
	for name, m := range sampleMessages() {
		t.Run(name, func(t *testing.T) {
			b := m.Append(nil)
			require.Equal(t, magic[:], b[:4])
			got := newMessage(b[5])
			require.NotNil(t, got)
			require.NoError(t, got.Decode(b, &testWireLimits))
			require.Equal(t, b, got.Append(nil), "re-encoding differs")
			// Appending keeps what dst held.
			pre := []byte("prefix")
			require.Equal(t, append(pre, b...), m.Append(pre))
			// The decoded message equals the sample, nil and empty slices alike.
			require.Equal(t, fmt.Sprint(m), fmt.Sprint(got))
		})
	}
}

func TestProtoRejects(t *testing.T) {
	for name, m := range sampleMessages() {
		t.Run(name, func(t *testing.T) {
			b := m.Append(nil)
			reject := func(why string, bad []byte) {
				t.Helper()
				err := newMessage(b[5]).Decode(bad, &testWireLimits)
				var me *MessageError
				require.ErrorAs(t, err, &me, why)
				require.ErrorIs(t, err, ErrProtocol)
			}
			for n := range len(b) {
				reject(fmt.Sprintf("truncated to %d", n), b[:n])
			}
			reject("trailing byte", append(bytes.Clone(b), 0))
			for _, off := range []int{0, 3, 4, 5, 6, 7} {
				bad := bytes.Clone(b)
				bad[off] ^= 0x10
				reject(fmt.Sprintf("header byte %d", off), bad)
			}
			// Every message kind refuses every other kind's encoding.
			for other, o := range sampleMessages() {
				ob := o.Append(nil)
				if ob[5] != b[5] {
					reject("kind of "+other, ob)
				}
			}
		})
	}
}

func TestProtoRejectsFields(t *testing.T) {
	le := binary.LittleEndian
	s := sampleMessages()
	enc := func(name string) []byte { return s[name].Append(nil) }
	tooLong := bytes.Repeat([]byte("k"), MaxKeyLen+1)
	manMax := make([]byte, testWireLimits.Manifest)
	cases := []struct {
		name string
		b    []byte
	}{
		{"reserve reply zero id", func() []byte { b := enc("reserve reply"); le.PutUint64(b[8:], 0); return b }()},
		{"reserve reply misaligned", func() []byte { b := enc("reserve reply"); le.PutUint64(b[16:], 65); return b }()},
		{"reserve reply odd length", func() []byte { b := enc("reserve reply"); le.PutUint64(b[24:], 1); return b }()},
		{"reserve reply overflow", func() []byte {
			b := enc("reserve reply")
			le.PutUint64(b[16:], math.MaxUint64&^63)
			le.PutUint64(b[24:], 128)
			return b
		}()},
		{"reserve reply zero TTL", func() []byte { b := enc("reserve reply"); le.PutUint64(b[32:], 0); return b }()},
		{"reserve reply long TTL", func() []byte { b := enc("reserve reply"); le.PutUint64(b[32:], uint64(MaxTTL)+1); return b }()},
		{"commit zero id", (&CommitRequest{Key: []byte("k"), Manifest: []byte("m")}).Append(nil)},
		{"commit empty key", (&CommitRequest{ID: 1, Manifest: []byte("m")}).Append(nil)},
		{"commit long key", (&CommitRequest{ID: 1, Key: tooLong}).Append(nil)},
		{"commit reserved", func() []byte { b := enc("commit request"); b[18] = 1; return b }()},
		{"commit manifest over limit", (&CommitRequest{ID: 1, Key: []byte("k"), Manifest: append(manMax, 0)}).Append(nil)},
		{"abort zero id", (&IDRequest{Method: MethodAbort}).Append(nil)},
		{"close zero id", (&IDRequest{Method: MethodClose}).Append(nil)},
		{"commit reply zero version", (&VersionReply{Method: MethodCommit}).Append(nil)},
		{"open empty key", (&KeyRequest{Method: MethodOpen}).Append(nil)},
		{"open reserved", func() []byte { b := enc("open request"); b[15] = 1; return b }()},
		{"delete long key", (&KeyRequest{Method: MethodDelete, Key: tooLong}).Append(nil)},
		{"open reply zero hold", func() []byte { b := enc("open reply"); le.PutUint64(b[8:], 0); return b }()},
		{"open reply zero version", func() []byte { b := enc("open reply"); le.PutUint64(b[16:], 0); return b }()},
		{"open reply misaligned", func() []byte { b := enc("open reply"); le.PutUint64(b[24:], 3); return b }()},
		{"open reply zero TTL", func() []byte { b := enc("open reply"); le.PutUint64(b[32:], 0); return b }()},
		{"open reply reserved", func() []byte { b := enc("open reply"); b[44] = 1; return b }()},
		{"open reply manifest over limit", (&OpenReply{Hold: 1, Version: 1, TTL: 1, Manifest: append(manMax, 0)}).Append(nil)},
		{"put-inline payload over limit", (&PutInlineRequest{Key: []byte("k"), Payload: make([]byte, testWireLimits.Inline+1)}).Append(nil)},
		{"put-inline reserved", func() []byte { b := enc("put-inline request"); b[10] = 1; return b }()},
		{"put-inline empty key", (&PutInlineRequest{Payload: []byte("x")}).Append(nil)},
		{"get-inline empty range", (&GetInlineRequest{Key: []byte("k"), Ranges: []ByteRange{{5, 0}}}).Append(nil)},
		{"get-inline overflowing range", (&GetInlineRequest{Key: []byte("k"), Ranges: []ByteRange{{math.MaxUint64, 2}}}).Append(nil)},
		{"get-inline ranges over limit", (&GetInlineRequest{Key: []byte("k"),
			Ranges: []ByteRange{{0, testWireLimits.Inline}, {0, 1}}}).Append(nil)},
		{"get-inline ranges wrapping the total", (&GetInlineRequest{Key: []byte("k"),
			Ranges: []ByteRange{{0, 10}, {0, math.MaxUint64 - 5}}}).Append(nil)},
		{"get-inline too many ranges", func() []byte { b := enc("get-inline request"); le.PutUint32(b[12:], MaxInlineRanges+1); return b }()},
		{"get-inline reserved", func() []byte { b := enc("get-inline request"); b[11] = 1; return b }()},
		{"get-inline reply zero version", (&GetInlineReply{}).Append(nil)},
		{"get-inline reply data over limit", (&GetInlineReply{Version: 1, Data: make([]byte, testWireLimits.Inline+1)}).Append(nil)},
		{"get-inline reply reserved", func() []byte { b := enc("get-inline reply"); b[20] = 1; return b }()},
		{"info reply reserved", func() []byte { b := enc("info reply"); b[46] = 1; return b }()},
		{"info reply flags", func() []byte { b := enc("info reply"); b[40] |= 2; return b }()},
		{"info reply inline", func() []byte { b := enc("info reply"); le.PutUint64(b[16:], MaxInlineLimit+1); return b }()},
		{"info reply zero TTL", func() []byte { b := enc("info reply"); le.PutUint64(b[24:], 0); return b }()},
		{"info reply hold TTL", func() []byte { b := enc("info reply"); le.PutUint64(b[32:], uint64(MaxTTL)+1); return b }()},
		{"info reply zero limit", func() []byte { b := enc("info reply"); le.PutUint64(b[48+8:], 0); return b }()},
		{"info reply huge limit", func() []byte { b := enc("info reply"); le.PutUint64(b[48:], math.MaxUint32+1); return b }()},
		{"info reply manifest limit", func() []byte { b := enc("info reply"); le.PutUint64(b[48+32:], MaxManifestBytes+1); return b }()},
		{"info reply empty region", (&InfoReply{Arena: 64, ReserveTTL: 1, HoldTTL: 1, Limits: testLimits}).Append(nil)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newMessage(c.b[5])
			err := m.Decode(c.b, &testWireLimits)
			require.ErrorIs(t, err, ErrProtocol)
			require.Regexp(t, `^structobj: [a-z-]+ (request|reply): `, err.Error())
		})
	}
}

func TestProtoLimitsAccepted(t *testing.T) {
	// Exactly at the limits is accepted.
	k := bytes.Repeat([]byte("k"), MaxKeyLen)
	for _, m := range []Message{
		&CommitRequest{ID: 1, Key: k, Manifest: make([]byte, testWireLimits.Manifest)},
		&PutInlineRequest{Key: k, Payload: make([]byte, testWireLimits.Inline)},
		&GetInlineRequest{Key: k, Ranges: []ByteRange{{math.MaxUint64 - testWireLimits.Inline, testWireLimits.Inline}}},
		&GetInlineReply{Version: 1, Data: make([]byte, testWireLimits.Inline)},
	} {
		b := m.Append(nil)
		require.NoError(t, newMessage(b[5]).Decode(b, &testWireLimits))
	}
	many := &GetInlineRequest{Key: []byte("k"), Ranges: make([]ByteRange, MaxInlineRanges)}
	for i := range many.Ranges {
		many.Ranges[i] = ByteRange{uint64(i), 1}
	}
	b := many.Append(nil)
	require.NoError(t, new(GetInlineRequest).Decode(b, &Limits{Inline: MaxInlineRanges}))
}

func TestProtoDecodeAllocatesNothing(t *testing.T) {
	s := sampleMessages()
	for _, name := range []string{"commit request", "open reply", "get-inline request", "get-inline reply",
		"put-inline request", "reserve reply", "open request"} {
		b := s[name].Append(nil)
		m := newMessage(b[5])
		allocs := testing.AllocsPerRun(100, func() {
			if err := m.Decode(b, &testWireLimits); err != nil {
				panic(err)
			}
		})
		require.Zero(t, allocs, name)
	}
}
