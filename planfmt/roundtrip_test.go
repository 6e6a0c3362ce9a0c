package planfmt

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

func TestIDWidth(t *testing.T) {
	tests := []struct {
		rows uint64
		want int
	}{
		{0, 1}, {1, 1}, {255, 1}, {256, 2}, {65535, 2}, {65536, 3},
		{1<<24 - 1, 3}, {1 << 24, 4}, {384_000_000, 4}, {math.MaxUint32, 4},
		{1 << 32, 5}, {1<<40 - 1, 5}, {1 << 40, 6}, {1 << 48, 7}, {1 << 56, 8}, {math.MaxInt64, 8},
	}
	for _, tc := range tests {
		got := idWidth(tc.rows)
		require.Equal(t, tc.want, got, "table of %d rows", tc.rows)
		// The all-ones value of the width (-1) must not name a row: the
		// largest id, rows-1, stays below it.
		allOnes := uint64(1)<<(8*got) - 1 // the shift yields 0 for 8 bytes
		require.LessOrEqual(t, tc.rows, allOnes)
		if got > 1 {
			require.GreaterOrEqual(t, tc.rows, uint64(1)<<(8*(got-1)), "width %d is not the fewest bytes", got)
		}
	}
}

func randCommand(rng *rand.Rand, p *Plan) *Command {
	c := &Command{
		OpID:     rng.Uint64(),
		Dir:      Direction(1 + rng.IntN(2)),
		Src:      Window{Key: rng.Uint64(), Off: rng.Uint64N(1 << 40), Len: p.SrcExtent},
		Dst:      Window{Key: rng.Uint64(), Off: rng.Uint64N(1 << 40), Len: p.DstExtent},
		Chunk:    1 + rng.Uint64N(8<<20),
		Pipeline: uint32(1 + rng.IntN(16)),
		Flags:    CommandFlags(rng.IntN(2)),
		Plan:     *p,
	}
	if c.Src.Off > math.MaxUint64-c.Src.Len {
		c.Src.Off = 0
	}
	if c.Dst.Off > math.MaxUint64-c.Dst.Len {
		c.Dst.Off = 0
	}
	return c
}

func TestPlanRoundTrip(t *testing.T) {
	rng := newRand(t)
	var dec Plan // reused across iterations on purpose
	for i := range 500 {
		p := randPlan(rng)
		prefix := []byte("prefix")
		b, err := AppendPlan(prefix, p)
		require.NoError(t, err, "plan %d", i)
		require.Equal(t, "prefix", string(b[:6]), "AppendPlan must keep dst")
		msg := b[6:]
		size, err := EncodedPlanSize(p)
		require.NoError(t, err)
		require.Len(t, msg, size)

		require.NoError(t, DecodePlan(&dec, msg), "plan %d", i)
		if diff := cmp.Diff(viewOf(p), viewOf(&dec)); diff != "" {
			t.Fatalf("plan %d (-sent +decoded):\n%s", i, diff)
		}
		if dec.Form == FormRows && dec.Rows.Len() > 0 {
			require.Equal(t, dec.Rows.TableRows <= math.MaxInt32, dec.Rows.IDs32 != nil, "decoded id storage")
		}
		again, err := AppendPlan(nil, &dec)
		require.NoError(t, err)
		require.Equal(t, msg, again, "re-encoding must reproduce the message")

		// Encoding over stale bytes must write every byte of the message.
		dirty := bytes.Repeat([]byte{0xa5}, size+16)
		over, err := AppendPlan(dirty[:0], p)
		require.NoError(t, err)
		require.Equal(t, msg, over, "plan %d: stale bytes leaked into the message", i)
	}
}

func TestCommandRoundTrip(t *testing.T) {
	rng := newRand(t)
	var dec Command
	for i := range 300 {
		c := randCommand(rng, randPlan(rng))
		b, err := AppendCommand(nil, c)
		require.NoError(t, err, "command %d", i)
		size, err := EncodedCommandSize(c)
		require.NoError(t, err)
		require.Len(t, b, size)
		shape, err := DefaultLimits.PeekCommand(b)
		require.NoError(t, err)
		require.Equal(t, CommandShape{Form: c.Plan.Form, Fragments: c.Plan.Fragments(), Completions: len(c.Plan.CompletionEnds)}, shape)
		require.NoError(t, DecodeCommand(&dec, b), "command %d", i)
		require.GreaterOrEqual(t, dec.Plan.Footprint(), int64(4*shape.Fragments), "the decoded plan keeps its ids or ranges")
		if diff := cmp.Diff(viewOf(&c.Plan), viewOf(&dec.Plan)); diff != "" {
			t.Fatalf("command %d plan (-sent +decoded):\n%s", i, diff)
		}
		got, want := dec, *c
		got.Plan, want.Plan = Plan{}, Plan{}
		require.Equal(t, want, got)
		again, err := AppendCommand(nil, &dec)
		require.NoError(t, err)
		require.Equal(t, b, again)
		over, err := AppendCommand(bytes.Repeat([]byte{0x5a}, size)[:0], c)
		require.NoError(t, err)
		require.Equal(t, b, over, "command %d: stale bytes leaked into the message", i)
	}
}

// TestPeekCommandRejects: PeekCommand refuses what the header alone shows
// wrong (magic, version, length, counts over the limits), and does not
// check the checksum (DecodeCommand does).
func TestPeekCommandRejects(t *testing.T) {
	rng := newRand(t)
	b, err := AppendCommand(nil, randCommand(rng, randPlan(rng)))
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		lim  Limits
		edit func([]byte) []byte
		want error
	}{
		{"magic", DefaultLimits, func(b []byte) []byte { b[0] ^= 1; return b }, ErrCorrupt},
		{"version", DefaultLimits, func(b []byte) []byte { b[offVersion]++; return b }, ErrVersion},
		{"truncated", DefaultLimits, func(b []byte) []byte { return b[:len(b)-1] }, ErrTruncated},
		{"fragments", Limits{MaxFragments: 1}, func(b []byte) []byte { le.PutUint32(b[offFragments:], 2); return b }, ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.lim.PeekCommand(tc.edit(bytes.Clone(b)))
			require.ErrorIs(t, err, tc.want)
		})
	}
	c := bytes.Clone(b)
	c[len(c)-1] ^= 0xff
	_, err = DefaultLimits.PeekCommand(c)
	require.NoError(t, err, "peek reads the header only")
	require.ErrorIs(t, DecodeCommand(new(Command), c), ErrChecksum)
}

// TestIDWidthsRoundTrip covers every id width at the edges of its table sizes,
// with -1, 0 and the largest id, from both id slice types.
func TestIDWidthsRoundTrip(t *testing.T) {
	var dec Plan
	for w := 1; w <= 8; w++ {
		lo := uint64(1) << (8 * (w - 1))
		if w == 1 {
			lo = 1
		}
		hi := uint64(1)<<(8*w) - 1
		if w == 8 {
			hi = math.MaxInt64
		}
		for _, rows := range []uint64{lo, hi} {
			ids := []int64{-1, 0, int64(rows - 1), -1, int64(rows / 2), int64(rows - 1)}
			for _, use32 := range []bool{false, true} {
				if use32 && rows-1 > math.MaxInt32 {
					continue
				}
				p := rowsPlan(1, rows, ids, Layout{}, rows, uint64(len(ids)))
				if use32 {
					p.Rows.IDs64 = nil
					for _, id := range ids {
						p.Rows.IDs32 = append(p.Rows.IDs32, int32(id))
					}
				}
				b, err := AppendPlan(nil, p)
				require.NoError(t, err, "w=%d rows=%d", w, rows)
				require.Len(t, b, headerSize+rowsDescSize+len(ids)*w)
				require.Equal(t, byte(w), b[headerSize+72])
				// -1 is the all-ones value of the width.
				for j := range w {
					require.Equal(t, byte(0xff), b[headerSize+rowsDescSize+j])
				}
				require.NoError(t, DecodePlan(&dec, b))
				require.Equal(t, viewOf(p), viewOf(&dec), "w=%d rows=%d", w, rows)
			}
		}
	}
}

// engramPlan is the reference workload: n random ids (a few -1) over a
// 384,000,000-row table of 264-byte rows, token-major into a packed
// [n/k, k, 264] output.
func engramPlan(rng *rand.Rand, n, k int) *Plan {
	const rows, rowSize = 384_000_000, 264
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(rng.Uint64N(rows))
		if rng.IntN(1000) == 0 {
			ids[i] = -1
		}
	}
	return &Plan{
		Form: FormRows, SrcExtent: rows * rowSize, DstExtent: uint64(n) * rowSize,
		Rows: Rows{RowSize: rowSize, TableRows: rows, IDs32: ids,
			Layout: Layout{Kind: LayoutStrided, Cols: uint64(k), RowStride: uint64(k) * rowSize, ColStride: rowSize}},
	}
}

func TestEngramEncodedSize(t *testing.T) {
	rng := newRand(t)
	p := engramPlan(rng, 98_304, 32)
	c := randCommand(rng, p)
	b, err := AppendCommand(nil, c)
	require.NoError(t, err)
	perRow := float64(len(b)) / 98_304
	t.Logf("command: %d bytes, %.4f B/row", len(b), perRow)
	require.LessOrEqual(t, perRow, 4.1)
}

func TestDecodeAllocs(t *testing.T) {
	rng := newRand(t)
	var cases [][]byte
	for _, p := range []*Plan{
		engramPlan(rng, 4096, 8),
		rowsPlan(8, 1<<40, []int64{1, -1, 1 << 39, 5}, Layout{}, 8<<40, 32),
		randRangesPlan(rng),
	} {
		b, err := AppendPlan(nil, p)
		require.NoError(t, err)
		cases = append(cases, b)
	}
	for i, b := range cases {
		var p Plan
		require.NoError(t, DecodePlan(&p, b))
		allocs := testing.AllocsPerRun(50, func() {
			if err := DecodePlan(&p, b); err != nil {
				t.Fatal(err)
			}
		})
		require.Zero(t, allocs, "plan %d", i)
	}
	cmdBytes, err := AppendCommand(nil, randCommand(rng, engramPlan(rng, 4096, 4)))
	require.NoError(t, err)
	var c Command
	require.NoError(t, DecodeCommand(&c, cmdBytes))
	require.Zero(t, testing.AllocsPerRun(50, func() {
		if err := DecodeCommand(&c, cmdBytes); err != nil {
			t.Fatal(err)
		}
	}), "command")

	// Encoding into a buffer with room allocates nothing either.
	buf := make([]byte, 0, len(cmdBytes))
	require.Zero(t, testing.AllocsPerRun(50, func() {
		if _, err := AppendCommand(buf[:0], &c); err != nil {
			t.Fatal(err)
		}
	}), "encode")
}

// TestDecodeGrowsOwnStorage checks that decoding never writes into a caller's
// id slice and that a larger message after a smaller one still decodes.
func TestDecodeGrowsOwnStorage(t *testing.T) {
	rng := newRand(t)
	mine := []int32{1, 2, 3}
	p := &Plan{Form: FormRows, SrcExtent: 80, DstExtent: 24, Rows: Rows{RowSize: 8, TableRows: 10, IDs32: mine}}
	small, err := AppendPlan(nil, rowsPlan(8, 10, []int64{4, 5}, Layout{}, 80, 16))
	require.NoError(t, err)
	require.NoError(t, DecodePlan(p, small))
	require.Equal(t, []int32{1, 2, 3}, mine, "caller's ids must be untouched")
	large := engramPlan(rng, 1000, 10)
	b, err := AppendPlan(nil, large)
	require.NoError(t, err)
	require.NoError(t, DecodePlan(p, b))
	require.Equal(t, viewOf(large), viewOf(p))
	require.NoError(t, DecodePlan(p, small))
	require.Equal(t, []int64{4, 5}, viewOf(p).IDs)
}

func TestAppendErrorKeepsDst(t *testing.T) {
	bad := rowsPlan(8, 10, []int64{1, 2, 10}, Layout{}, 80, 24)
	dst := append(make([]byte, 0, 4096), "keep"...)
	out, err := AppendPlan(dst, bad)
	require.ErrorIs(t, err, ErrBounds)
	var be *BoundsError
	require.ErrorAs(t, err, &be)
	require.Equal(t, 2, be.Index)
	require.Equal(t, "keep", string(out))

	c := &Command{Dir: Read, Chunk: 1, Pipeline: 1, Src: Window{Len: 80}, Dst: Window{Len: 24}, Plan: *bad}
	out, err = AppendCommand(dst, c)
	require.ErrorIs(t, err, ErrBounds)
	require.Equal(t, "keep", string(out))
}

func TestCommandEncodeRejects(t *testing.T) {
	good := func() *Command {
		return &Command{Dir: Write, Chunk: 1 << 20, Pipeline: 4, Src: Window{Len: 80}, Dst: Window{Len: 16},
			Plan: *rowsPlan(8, 10, []int64{1, 2}, Layout{}, 80, 16)}
	}
	_, err := AppendCommand(nil, good())
	require.NoError(t, err)
	tests := []struct {
		name string
		mut  func(c *Command)
		is   error
	}{
		{"zero direction", func(c *Command) { c.Dir = 0 }, ErrInvalid},
		{"unknown direction", func(c *Command) { c.Dir = 3 }, ErrInvalid},
		{"reserved flag", func(c *Command) { c.Flags = 1 << 5 }, ErrInvalid},
		{"zero chunk", func(c *Command) { c.Chunk = 0 }, ErrInvalid},
		{"zero pipeline", func(c *Command) { c.Pipeline = 0 }, ErrInvalid},
		{"src window wraps", func(c *Command) { c.Src.Off = math.MaxUint64 - 10 }, ErrInvalid},
		{"dst window wraps", func(c *Command) { c.Dst.Off = math.MaxUint64 }, ErrInvalid},
		{"extent differs from window", func(c *Command) { c.Dst.Len = 17 }, ErrInvalid},
		{"bad plan", func(c *Command) { c.Plan.Rows.RowSize = 0 }, ErrInvalid},
		{"id out of table", func(c *Command) { c.Plan.Rows.IDs64 = []int64{1, 10} }, ErrBounds},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.mut(c)
			_, err := AppendCommand(nil, c)
			require.ErrorIs(t, err, tc.is)
			_, err = EncodedCommandSize(c)
			if tc.is == ErrInvalid {
				require.ErrorIs(t, err, tc.is)
			}
		})
	}
}
