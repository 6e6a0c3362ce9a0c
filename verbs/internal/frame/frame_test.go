package frame

import (
	"bytes"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

var update = flag.Bool("update", false, "rewrite testdata/frames.golden and the fuzz seed corpus")

// validHeaders has one well-formed header of every type.
var validHeaders = []struct {
	name string
	h    Header
}{
	{"hello", Header{Type: TypeHello, Len: helloFixed}},
	{"welcome", Header{Type: TypeWelcome, Len: 66}},
	{"join", Header{Type: TypeJoin, ID: 0x1122334455667788, Key: 0x0102030405060708, Off: 3}},
	{"joined", Header{Type: TypeJoined}},
	{"read", Header{Type: TypeRead, Len: 264, ID: 0x00000a0000000001, Key: 0xfeedfacecafebeef, Off: 0x1000}},
	{"write", Header{Type: TypeWrite, Len: 4, ID: 2, Key: 0xfeedfacecafebeef, Off: 8}},
	{"data-ok", Header{Type: TypeData, Len: 264, ID: 0x00000a0000000001}},
	{"data-bounds", Header{Type: TypeData, Status: verbs.StatusBounds, ID: 9}},
	{"ack", Header{Type: TypeAck, Status: verbs.StatusAccess, ID: 2}},
	{"call", Header{Type: TypeCall, Method: 7, Len: 3, ID: 1}},
	{"reply-ok", Header{Type: TypeReply, Method: 7, Len: 2, ID: 1}},
	{"reply-handler", Header{Type: TypeReply, Status: verbs.StatusHandler, Method: 7, Len: 4, ID: 1}},
	{"ping", Header{Type: TypePing, ID: 5}},
	{"pong", Header{Type: TypePong, ID: 5}},
	{"params", Header{Type: TypeParams, Len: ParamsSize}},
}

func TestHeaderRoundTrip(t *testing.T) {
	for _, tc := range validHeaders {
		t.Run(tc.name, func(t *testing.T) {
			b := Append([]byte("prefix"), &tc.h)
			require.Len(t, b, 6+HeaderSize)
			var got Header
			require.NoError(t, Decode(&got, b[6:]))
			require.Empty(t, cmp.Diff(tc.h, got))
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    Header
	}{
		{"type-zero", Header{}},
		{"type-unknown", Header{Type: 200}},
		{"read-with-status", Header{Type: TypeRead, Status: 1}},
		{"read-with-method", Header{Type: TypeRead, Method: 1}},
		{"write-with-status", Header{Type: TypeWrite, Status: 2}},
		{"data-with-key", Header{Type: TypeData, Key: 1}},
		{"data-with-off", Header{Type: TypeData, Off: 1}},
		{"data-failed-with-payload", Header{Type: TypeData, Status: verbs.StatusBadKey, Len: 1}},
		{"data-closed", Header{Type: TypeData, Status: verbs.StatusClosed}},
		{"data-unknown-status", Header{Type: TypeData, Status: 99}},
		{"ack-with-len", Header{Type: TypeAck, Len: 1}},
		{"ack-handler-status", Header{Type: TypeAck, Status: verbs.StatusHandler}},
		{"call-with-status", Header{Type: TypeCall, Status: 1}},
		{"call-too-long", Header{Type: TypeCall, Len: MaxMessage + 1}},
		{"reply-bounds-status", Header{Type: TypeReply, Status: verbs.StatusBounds}},
		{"reply-with-key", Header{Type: TypeReply, Key: 3}},
		{"ping-with-len", Header{Type: TypePing, Len: 1}},
		{"pong-with-key", Header{Type: TypePong, Key: 1}},
		{"hello-short", Header{Type: TypeHello, Len: helloFixed - 1}},
		{"hello-long", Header{Type: TypeHello, Len: MaxHello + 1}},
		{"hello-with-id", Header{Type: TypeHello, Len: helloFixed, ID: 1}},
		{"join-no-token", Header{Type: TypeJoin, Off: 1}},
		{"join-lane-zero", Header{Type: TypeJoin, Key: 1}},
		{"join-lane-too-big", Header{Type: TypeJoin, Key: 1, Off: verbs.MaxLanes}},
		{"joined-with-id", Header{Type: TypeJoined, ID: 1}},
		{"params-wrong-size", Header{Type: TypeParams, Len: ParamsSize + 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b [HeaderSize]byte
			tc.h.Put(b[:])
			var got Header
			err := Decode(&got, b[:])
			require.ErrorIs(t, err, verbs.ErrProtocol)
			var pe *verbs.ProtocolError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, "frame", pe.Stage)
		})
	}
	require.ErrorIs(t, Decode(new(Header), make([]byte, HeaderSize-1)), verbs.ErrProtocol)
}

func TestDecodeAllocs(t *testing.T) {
	b := Append(nil, &validHeaders[4].h)
	var h Header
	require.Zero(t, testing.AllocsPerRun(100, func() {
		if err := Decode(&h, b); err != nil {
			t.Fatal(err)
		}
	}))
	buf := make([]byte, 0, HeaderSize)
	require.Zero(t, testing.AllocsPerRun(100, func() { buf = Append(buf[:0], &h) }))
}

var sampleHello = Hello{
	Flags: FlagUnchecked, Lanes: 4, QueueDepth: 4096, ConnID: 0x0102030405060708, Token: 0x1111111111111111,
	ProbeKey: 0x2222222222222222, ProbeLen: 4 << 20,
	Regions: []verbs.RegionInfo{
		{Name: "table", Key: 0x3333333333333333, Len: 1 << 30, Access: verbs.AccessRemoteRead},
		{Name: "dst", Key: 0x4444444444444444, Len: 4096, Access: verbs.AccessRemoteRead | verbs.AccessRemoteWrite | verbs.AccessLocal},
	},
}

func TestHelloRoundTrip(t *testing.T) {
	for _, h := range []Hello{{Lanes: 1}, sampleHello} {
		b := AppendHello(nil, &h)
		require.Len(t, b, HelloSize(&h))
		var got Hello
		got.Regions = make([]verbs.RegionInfo, 0, 1) // reused
		require.NoError(t, DecodeHello(&got, b))
		if len(h.Regions) == 0 {
			h.Regions = got.Regions[:0]
		}
		require.Empty(t, cmp.Diff(h, got))
	}
}

func TestDecodeHelloRejects(t *testing.T) {
	good := AppendHello(nil, &sampleHello)
	mutate := func(f func(h *Hello)) []byte {
		h := sampleHello
		h.Regions = append([]verbs.RegionInfo(nil), sampleHello.Regions...)
		f(&h)
		return AppendHello(nil, &h)
	}
	for _, tc := range []struct {
		name   string
		b      []byte
		reason string
	}{
		{"short", good[:helloFixed-1], "short"},
		{"unknown-flag", func() []byte { b := bytes.Clone(good); b[48] = 0x80; return b }(), "flags"},
		{"reserved-after-flags", func() []byte { b := bytes.Clone(good); b[53] = 1; return b }(), "reserved"},
		{"magic", append([]byte{1}, good[1:]...), "magic"},
		{"version", func() []byte { b := bytes.Clone(good); b[4] = Version + 1; return b }(), "version"},
		{"too-many-regions", func() []byte { b := bytes.Clone(good); b[12] = MaxRegions + 1; return b }(), "regions"},
		{"truncated-table", good[:len(good)-1], "truncated"},
		{"trailing", append(bytes.Clone(good), 0), "trailing"},
		{"zero-key", mutate(func(h *Hello) { h.Regions[0].Key = 0 }), "key 0"},
		{"probe-key-reused", mutate(func(h *Hello) { h.Regions[0].Key = h.ProbeKey }), "probe"},
		{"probe-len-without-key", mutate(func(h *Hello) { h.ProbeKey = 0 }), "probe"},
		{"zero-len", mutate(func(h *Hello) { h.Regions[1].Len = 0 }), "0 bytes"},
		{"no-remote-access", mutate(func(h *Hello) { h.Regions[0].Access = verbs.AccessLocal }), "access"},
		{"unknown-access", mutate(func(h *Hello) { h.Regions[0].Access = 0x81 }), "access"},
		{"empty-name", mutate(func(h *Hello) { h.Regions[0].Name = "" }), "name"},
		{"duplicate-key", mutate(func(h *Hello) { h.Regions[1].Key = h.Regions[0].Key }), "duplicate"},
		{"duplicate-name", mutate(func(h *Hello) { h.Regions[1].Name = h.Regions[0].Name }), "duplicate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Hello
			err := DecodeHello(&h, tc.b)
			require.ErrorIs(t, err, verbs.ErrProtocol)
			require.ErrorContains(t, err, tc.reason)
		})
	}
}

func TestParams(t *testing.T) {
	p := verbs.LinkParams{Bandwidth: 3.3e9, PostRate: 1.5e6, QueueDepth: 4096, RTT: 24 * time.Microsecond}
	got, err := DecodeParams(AppendParams(nil, p))
	require.NoError(t, err)
	require.Equal(t, p, got)
	for _, bad := range []verbs.LinkParams{
		{Bandwidth: math.NaN()}, {Bandwidth: -1}, {PostRate: math.Inf(1)},
		{QueueDepth: verbs.MaxQueueDepth + 1}, {RTT: -time.Second},
	} {
		_, err := DecodeParams(AppendParams(nil, bad))
		require.ErrorIs(t, err, verbs.ErrProtocol, "%+v", bad)
	}
	_, err = DecodeParams(make([]byte, ParamsSize-1))
	require.ErrorIs(t, err, verbs.ErrProtocol)
}

// chunky returns at most n bytes per Read.
type chunky struct {
	r io.Reader
	n int
}

func (c *chunky) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

func TestReader(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB: read directly
	var stream []byte
	stream = Append(stream, &Header{Type: TypeWrite, ID: 1, Key: 1, Len: 5})
	stream = append(stream, "hello"...)
	stream = Append(stream, &Header{Type: TypeData, ID: 2, Len: uint32(len(payload))})
	stream = append(stream, payload...)
	stream = Append(stream, &Header{Type: TypeCall, ID: 3, Method: 1, Len: 7})
	stream = append(stream, "discard"...)
	stream = Append(stream, &Header{Type: TypePing, ID: 4})
	for _, chunk := range []int{1, 7, 31, 4096, 1 << 30} {
		t.Run(fmt.Sprint("chunk=", chunk), func(t *testing.T) {
			r := NewReader(&chunky{bytes.NewReader(stream), chunk}, 4096)
			var h Header
			require.NoError(t, r.Next(&h))
			require.Equal(t, uint64(1), h.ID)
			small := make([]byte, 5)
			require.NoError(t, r.ReadFull(small))
			require.Equal(t, "hello", string(small))
			require.NoError(t, r.Next(&h))
			big := make([]byte, h.Len)
			require.NoError(t, r.ReadFull(big))
			require.True(t, bytes.Equal(payload, big))
			require.NoError(t, r.Next(&h))
			require.NoError(t, r.Discard(uint64(h.Len)))
			require.NoError(t, r.Next(&h))
			require.Equal(t, TypePing, h.Type)
			require.ErrorIs(t, r.Next(&h), io.EOF)
		})
	}
	t.Run("truncated-header", func(t *testing.T) {
		r := NewReader(bytes.NewReader(stream[:10]), 4096)
		require.ErrorIs(t, r.Next(new(Header)), io.ErrUnexpectedEOF)
	})
	t.Run("truncated-payload", func(t *testing.T) {
		r := NewReader(bytes.NewReader(stream[:HeaderSize+2]), 4096)
		require.NoError(t, r.Next(new(Header)))
		require.ErrorIs(t, r.ReadFull(make([]byte, 5)), io.ErrUnexpectedEOF)
		r = NewReader(bytes.NewReader(stream[:HeaderSize+2]), 4096)
		require.NoError(t, r.Next(new(Header)))
		require.ErrorIs(t, r.Discard(5), io.ErrUnexpectedEOF)
	})
	t.Run("read-error", func(t *testing.T) {
		boom := errors.New("boom")
		r := NewReader(io.MultiReader(bytes.NewReader(stream[:HeaderSize]), &failing{boom}), 4096)
		require.NoError(t, r.Next(new(Header)))
		require.ErrorIs(t, r.ReadFull(make([]byte, 5)), boom)
	})
}

type failing struct{ err error }

func (f *failing) Read([]byte) (int, error) { return 0, f.err }

func TestReaderAllocs(t *testing.T) {
	one := Append(nil, &Header{Type: TypeData, ID: 2, Len: 8})
	one = append(one, "payload!"...)
	stream := bytes.Repeat(one, 200)
	src := bytes.NewReader(stream)
	r := NewReader(src, 4096)
	var h Header
	dst := make([]byte, 8)
	require.Zero(t, testing.AllocsPerRun(100, func() {
		if r.Buffered() == 0 && src.Len() == 0 {
			src.Reset(stream)
		}
		if err := r.Next(&h); err != nil {
			t.Fatal(err)
		}
		if err := r.ReadFull(dst); err != nil {
			t.Fatal(err)
		}
	}))
}

// TestCheckedReader: a checked frame passes; a flipped bit anywhere in
// its header or trailer fails Next with a *ProtocolError before the header
// is used; a flipped bit in its payload fails Verify once the payload is
// read (through ReadFull or Discard); an unchecked Reader never checks.
func TestCheckedReader(t *testing.T) {
	payload := bytes.Repeat([]byte("scatter"), 100)
	h := Header{Type: TypeWrite, ID: 9, Key: 77, Off: 128, Len: uint32(len(payload))}
	good := AppendCheckedFrame(nil, &h, payload)
	read := func(b []byte, discard bool) (nextErr, verifyErr error) {
		r := NewReader(bytes.NewReader(b), 4096)
		r.Checked = true
		var got Header
		if nextErr = r.Next(&got); nextErr != nil {
			return nextErr, nil
		}
		require.Equal(t, h, got)
		if discard {
			require.NoError(t, r.Discard(uint64(got.Len)))
		} else {
			require.NoError(t, r.ReadFull(make([]byte, got.Len)))
		}
		return nil, r.Verify()
	}
	for _, discard := range []bool{false, true} {
		n, v := read(good, discard)
		require.NoError(t, n)
		require.NoError(t, v)
	}
	for i := range len(good) {
		b := bytes.Clone(good)
		b[i] ^= 0x10
		n, v := read(b, i%2 == 0)
		if i < HeaderSize+TrailerSize {
			require.ErrorIs(t, n, verbs.ErrProtocol, "byte %d of the header or trailer", i)
			continue
		}
		require.NoError(t, n)
		require.ErrorIs(t, v, verbs.ErrProtocol, "byte %d of the payload", i)
	}
	r := NewReader(bytes.NewReader(Append(nil, &Header{Type: TypePing, ID: 3})), 4096)
	var got Header
	require.NoError(t, r.Next(&got))
	require.NoError(t, r.Verify(), "an unchecked reader does not check")
}

// TestGolden renders every frame kind with field annotations and compares
// with testdata/frames.golden; -update rewrites it and the fuzz seeds.
func TestGolden(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("# Frame headers: 32 bytes, little-endian.\n")
	sb.WriteString("# type(1) status(1) method(2) len(4) | id(8) | key(8) | off(8)\n\n")
	var seeds [][]byte
	for _, tc := range validHeaders {
		b := Append(nil, &tc.h)
		seeds = append(seeds, b)
		fmt.Fprintf(&sb, "%s: %s\n  %s %s %s %s | %s | %s | %s\n", tc.name, tc.h.Type,
			hex.EncodeToString(b[0:1]), hex.EncodeToString(b[1:2]), hex.EncodeToString(b[2:4]), hex.EncodeToString(b[4:8]),
			hex.EncodeToString(b[8:16]), hex.EncodeToString(b[16:24]), hex.EncodeToString(b[24:32]))
	}
	hb := AppendHello(nil, &sampleHello)
	sb.WriteString("\n# HELLO/WELCOME body: magic(4) version(2) lanes(2) depth(4) count(4) | conn(8) | token(8) | probe key(8) | probe len(8) | flags(4) reserved(4)\n")
	sb.WriteString("# then per region: key(8) len(8) access(1) namelen(1) name\n")
	fmt.Fprintf(&sb, "fixed: %s\n", hex.EncodeToString(hb[:helloFixed]))
	for p, i := hb[helloFixed:], 0; len(p) > 0; i++ {
		n := regionFixed + int(p[17])
		fmt.Fprintf(&sb, "region %d: %s %s %s %s %q\n", i, hex.EncodeToString(p[0:8]), hex.EncodeToString(p[8:16]),
			hex.EncodeToString(p[16:17]), hex.EncodeToString(p[17:18]), p[18:n])
		p = p[n:]
	}
	pb := AppendParams(nil, verbs.LinkParams{Bandwidth: 3.3e9, PostRate: 1.5e6, QueueDepth: 4096, RTT: 24 * time.Microsecond})
	sb.WriteString("\n# PARAMS body: bandwidth f64 | post rate f64 | queue depth u64 | rtt ns u64\n")
	fmt.Fprintf(&sb, "params: %s | %s | %s | %s\n", hex.EncodeToString(pb[0:8]), hex.EncodeToString(pb[8:16]),
		hex.EncodeToString(pb[16:24]), hex.EncodeToString(pb[24:32]))

	cb := AppendCheckedFrame(nil, &Header{Type: TypeWrite, ID: 7, Key: 0x1122334455667788, Off: 64, Len: 5}, []byte("hello"))
	sb.WriteString("\n# A checked frame (verbs/tcp): header(32) | header crc32c(4) | payload crc32c(4) | payload\n")
	fmt.Fprintf(&sb, "checked WRITE: %s | %s | %s | %s\n", hex.EncodeToString(cb[:HeaderSize]),
		hex.EncodeToString(cb[HeaderSize:HeaderSize+4]), hex.EncodeToString(cb[HeaderSize+4:HeaderSize+8]), cb[HeaderSize+8:])

	golden := filepath.Join("testdata", "frames.golden")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(sb.String()), 0o644))
		writeSeeds(t, "FuzzDecode", seeds)
		writeSeeds(t, "FuzzDecodeHello", [][]byte{hb, AppendHello(nil, &Hello{Lanes: 1})})
		writeSeeds(t, "FuzzDecodeParams", [][]byte{pb})
		var stream []byte
		for _, s := range seeds {
			stream = append(stream, s...)
		}
		writeSeeds(t, "FuzzReader", [][]byte{stream})
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run with -update to create it")
	require.Empty(t, cmp.Diff(string(want), sb.String()), "run with -update after an intended format change")
}

func writeSeeds(t *testing.T, target string, seeds [][]byte) {
	dir := filepath.Join("testdata", "fuzz", target)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for i, s := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%02d", i)), []byte(body), 0o644))
	}
}

// TestSealChecked: a frame appended with a zero payload checksum and
// sealed later is byte for byte the frame appended with the checksum at
// once (so a reader verifies it as it would the other).
func TestSealChecked(t *testing.T) {
	payload := make([]byte, 3000)
	for i := range payload {
		payload[i] = byte(i*7 + 3)
	}
	h := Header{Type: TypeWrite, ID: 42, Key: 7, Off: 1 << 33, Len: uint32(len(payload))}
	want := AppendChecked([]byte("prefix"), &h, PayloadCRC(payload))
	got := AppendChecked([]byte("prefix"), &h, 0)
	SealChecked(got[len("prefix"):], PayloadCRC(payload))
	if !bytes.Equal(want, got) {
		t.Fatalf("sealed frame differs:\n got %x\nwant %x", got, want)
	}
}
