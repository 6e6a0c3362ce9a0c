package structobj

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// wireMessage is what every protocol message implements.
type wireMessage interface {
	appendTo(dst []byte) []byte
	decodeFrom(b []byte, lim *wireLimits) error
}

// testLimits are manifest limits an Info reply may carry.
var testLimits = Limits{MaxMembers: 1 << 16, MaxDims: 32, MaxMeta: 1024, MaxMetaBytes: 1 << 20, MaxBytes: MaxManifestBytes}

// testWireLimits are small, so tests and the fuzzers reach them.
var testWireLimits = wireLimits{manifest: 1 << 12, inline: 1 << 14}

// newMessage returns an empty message of a header kind (nil: none).
func newMessage(k byte) wireMessage {
	reply := k&replyBit != 0
	method := uint16(k&^replyBit) + methodBase
	switch {
	case method == MethodInfo && reply:
		return new(infoReply)
	case method == MethodInfo:
		return &emptyRequest{method: method}
	case method == MethodReserve && reply:
		return new(reserveReply)
	case method == MethodReserve:
		return new(reserveRequest)
	case method == MethodCommit && reply, method == MethodDelete && reply, method == MethodPutInline && reply:
		return &versionReply{method: method}
	case method == MethodCommit:
		return new(commitRequest)
	case method == MethodAbort && reply, method == MethodClose && reply:
		return &emptyReply{method: method}
	case method == MethodAbort, method == MethodClose:
		return &idMessage{method: method}
	case method == MethodOpen && reply:
		return new(openReply)
	case method == MethodOpen, method == MethodDelete:
		return &keyRequest{method: method}
	case method == MethodPutInline:
		return new(putInlineRequest)
	case method == MethodGetInline && reply:
		return new(getInlineReply)
	case method == MethodGetInline:
		return new(getInlineRequest)
	}
	return nil
}

// sampleMessages are valid messages of every kind, named.
func sampleMessages() map[string]wireMessage {
	key := []byte("layer3/shard-0.bin")
	man := bytes.Repeat([]byte{0xa5}, 100)
	return map[string]wireMessage{
		"info request": &emptyRequest{method: MethodInfo},
		"info reply": &infoReply{arena: 1 << 30, maxInline: 8 << 20, reserveTTL: 30 * time.Second, holdTTL: time.Minute,
			gather: true, limits: testLimits, region: RegionName, namespace: "jobs/7"},
		"info reply minimal": &infoReply{arena: 64, reserveTTL: 1, holdTTL: MaxTTL,
			limits: Limits{MaxMembers: 1, MaxDims: 1, MaxMeta: 1, MaxMetaBytes: 1, MaxBytes: 1}, region: "r"},
		"reserve request":      &reserveRequest{size: 12345},
		"reserve request zero": &reserveRequest{},
		"reserve reply":        &reserveReply{id: 7, off: 4096, length: 12352, ttl: time.Second},
		"commit request":       &commitRequest{id: 7, key: key, manifest: man},
		"commit reply":         &versionReply{method: MethodCommit, version: 3},
		"abort request":        &idMessage{method: MethodAbort, id: 7},
		"abort reply":          &emptyReply{method: MethodAbort},
		"open request":         &keyRequest{method: MethodOpen, key: key},
		"open reply":           &openReply{hold: 9, version: 3, off: 4096, ttl: time.Minute, manifest: man},
		"close request":        &idMessage{method: MethodClose, id: 9},
		"close reply":          &emptyReply{method: MethodClose},
		"delete request":       &keyRequest{method: MethodDelete, key: key},
		"delete reply":         &versionReply{method: MethodDelete, version: 3},
		"put-inline request":   &putInlineRequest{key: key, manifest: man, payload: []byte("payload bytes")},
		"put-inline reply":     &versionReply{method: MethodPutInline, version: 4},
		"get-inline request":   &getInlineRequest{key: key, ranges: []byteRange{{0, 5}, {100, 1}, {7, 3}}},
		"get-inline whole":     &getInlineRequest{key: key},
		"get-inline reply":     &getInlineReply{version: 4, manifest: man, data: []byte("abcdefghi")},
	}
}

func TestProtoRoundTrip(t *testing.T) {
	for name, m := range sampleMessages() {
		t.Run(name, func(t *testing.T) {
			b := m.appendTo(nil)
			require.Equal(t, protoMagic[:], b[:4])
			got := newMessage(b[5])
			require.NotNil(t, got)
			require.NoError(t, got.decodeFrom(b, &testWireLimits))
			require.Equal(t, b, got.appendTo(nil), "re-encoding differs")
			// Appending keeps what dst held.
			pre := []byte("prefix")
			require.Equal(t, append(pre, b...), m.appendTo(pre))
			// The decoded message equals the sample, nil and empty slices alike.
			require.Equal(t, fmt.Sprint(m), fmt.Sprint(got))
		})
	}
}

func TestProtoRejects(t *testing.T) {
	for name, m := range sampleMessages() {
		t.Run(name, func(t *testing.T) {
			b := m.appendTo(nil)
			reject := func(why string, bad []byte) {
				t.Helper()
				err := newMessage(b[5]).decodeFrom(bad, &testWireLimits)
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
				ob := o.appendTo(nil)
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
	enc := func(name string) []byte { return s[name].appendTo(nil) }
	tooLong := bytes.Repeat([]byte("k"), MaxKeyLen+1)
	manMax := make([]byte, testWireLimits.manifest)
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
		{"commit zero id", (&commitRequest{key: []byte("k"), manifest: []byte("m")}).appendTo(nil)},
		{"commit empty key", (&commitRequest{id: 1, manifest: []byte("m")}).appendTo(nil)},
		{"commit long key", (&commitRequest{id: 1, key: tooLong}).appendTo(nil)},
		{"commit reserved", func() []byte { b := enc("commit request"); b[18] = 1; return b }()},
		{"commit manifest over limit", (&commitRequest{id: 1, key: []byte("k"), manifest: append(manMax, 0)}).appendTo(nil)},
		{"abort zero id", (&idMessage{method: MethodAbort}).appendTo(nil)},
		{"close zero id", (&idMessage{method: MethodClose}).appendTo(nil)},
		{"commit reply zero version", (&versionReply{method: MethodCommit}).appendTo(nil)},
		{"open empty key", (&keyRequest{method: MethodOpen}).appendTo(nil)},
		{"open reserved", func() []byte { b := enc("open request"); b[15] = 1; return b }()},
		{"delete long key", (&keyRequest{method: MethodDelete, key: tooLong}).appendTo(nil)},
		{"open reply zero hold", func() []byte { b := enc("open reply"); le.PutUint64(b[8:], 0); return b }()},
		{"open reply zero version", func() []byte { b := enc("open reply"); le.PutUint64(b[16:], 0); return b }()},
		{"open reply misaligned", func() []byte { b := enc("open reply"); le.PutUint64(b[24:], 3); return b }()},
		{"open reply zero TTL", func() []byte { b := enc("open reply"); le.PutUint64(b[32:], 0); return b }()},
		{"open reply reserved", func() []byte { b := enc("open reply"); b[44] = 1; return b }()},
		{"open reply manifest over limit", (&openReply{hold: 1, version: 1, ttl: 1, manifest: append(manMax, 0)}).appendTo(nil)},
		{"put-inline payload over limit", (&putInlineRequest{key: []byte("k"), payload: make([]byte, testWireLimits.inline+1)}).appendTo(nil)},
		{"put-inline reserved", func() []byte { b := enc("put-inline request"); b[10] = 1; return b }()},
		{"put-inline empty key", (&putInlineRequest{payload: []byte("x")}).appendTo(nil)},
		{"get-inline empty range", (&getInlineRequest{key: []byte("k"), ranges: []byteRange{{5, 0}}}).appendTo(nil)},
		{"get-inline overflowing range", (&getInlineRequest{key: []byte("k"), ranges: []byteRange{{math.MaxUint64, 2}}}).appendTo(nil)},
		{"get-inline ranges over limit", (&getInlineRequest{key: []byte("k"),
			ranges: []byteRange{{0, testWireLimits.inline}, {0, 1}}}).appendTo(nil)},
		{"get-inline ranges wrapping the total", (&getInlineRequest{key: []byte("k"),
			ranges: []byteRange{{0, 10}, {0, math.MaxUint64 - 5}}}).appendTo(nil)},
		{"get-inline too many ranges", func() []byte { b := enc("get-inline request"); le.PutUint32(b[12:], MaxInlineRanges+1); return b }()},
		{"get-inline reserved", func() []byte { b := enc("get-inline request"); b[11] = 1; return b }()},
		{"get-inline reply zero version", (&getInlineReply{}).appendTo(nil)},
		{"get-inline reply data over limit", (&getInlineReply{version: 1, data: make([]byte, testWireLimits.inline+1)}).appendTo(nil)},
		{"get-inline reply reserved", func() []byte { b := enc("get-inline reply"); b[20] = 1; return b }()},
		{"info reply reserved", func() []byte { b := enc("info reply"); b[46] = 1; return b }()},
		{"info reply flags", func() []byte { b := enc("info reply"); b[40] |= 2; return b }()},
		{"info reply inline", func() []byte { b := enc("info reply"); le.PutUint64(b[16:], MaxInlineLimit+1); return b }()},
		{"info reply zero TTL", func() []byte { b := enc("info reply"); le.PutUint64(b[24:], 0); return b }()},
		{"info reply hold TTL", func() []byte { b := enc("info reply"); le.PutUint64(b[32:], uint64(MaxTTL)+1); return b }()},
		{"info reply zero limit", func() []byte { b := enc("info reply"); le.PutUint64(b[48+8:], 0); return b }()},
		{"info reply huge limit", func() []byte { b := enc("info reply"); le.PutUint64(b[48:], math.MaxUint32+1); return b }()},
		{"info reply manifest limit", func() []byte { b := enc("info reply"); le.PutUint64(b[48+32:], MaxManifestBytes+1); return b }()},
		{"info reply empty region", (&infoReply{arena: 64, reserveTTL: 1, holdTTL: 1, limits: testLimits}).appendTo(nil)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newMessage(c.b[5])
			err := m.decodeFrom(c.b, &testWireLimits)
			require.ErrorIs(t, err, ErrProtocol)
			require.Regexp(t, `^structobj: [a-z-]+ (request|reply): `, err.Error())
		})
	}
}

func TestProtoLimitsAccepted(t *testing.T) {
	// Exactly at the limits is accepted.
	k := bytes.Repeat([]byte("k"), MaxKeyLen)
	for _, m := range []wireMessage{
		&commitRequest{id: 1, key: k, manifest: make([]byte, testWireLimits.manifest)},
		&putInlineRequest{key: k, payload: make([]byte, testWireLimits.inline)},
		&getInlineRequest{key: k, ranges: []byteRange{{math.MaxUint64 - testWireLimits.inline, testWireLimits.inline}}},
		&getInlineReply{version: 1, data: make([]byte, testWireLimits.inline)},
	} {
		b := m.appendTo(nil)
		require.NoError(t, newMessage(b[5]).decodeFrom(b, &testWireLimits))
	}
	many := &getInlineRequest{key: []byte("k"), ranges: make([]byteRange, MaxInlineRanges)}
	for i := range many.ranges {
		many.ranges[i] = byteRange{uint64(i), 1}
	}
	b := many.appendTo(nil)
	require.NoError(t, new(getInlineRequest).decodeFrom(b, &wireLimits{inline: MaxInlineRanges}))
}

func TestProtoDecodeAllocatesNothing(t *testing.T) {
	s := sampleMessages()
	for _, name := range []string{"commit request", "open reply", "get-inline request", "get-inline reply",
		"put-inline request", "reserve reply", "open request"} {
		b := s[name].appendTo(nil)
		m := newMessage(b[5])
		allocs := testing.AllocsPerRun(100, func() {
			if err := m.decodeFrom(b, &testWireLimits); err != nil {
				panic(err)
			}
		})
		require.Zero(t, allocs, name)
	}
}
