package cudagather

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// DevPtr is a device address (CUdeviceptr).
type DevPtr uintptr

// Stream is a raw CUstream handle; 0 is the context's legacy default
// stream. A framework's stream (torch.cuda.Stream.cuda_stream, say) can be
// passed as is.
type Stream uintptr

// MaxColumns is the most columns (K) one lookup may have: the kernel gets
// one descriptor per column in its parameter block.
const MaxColumns = 64

// Request is one lookup: ids [T,K] (row-major, int32 or int64, in device
// memory) into Out, a [T,K] array of R-byte rows at byte strides.
type Request struct {
	// Tables holds one table per column (K entries; a table may repeat).
	// All must have the same row size R.
	Tables []*Table
	// IDs is the device address of id (0, 0); IDs64 says int64 ids.
	IDs   DevPtr
	IDs64 bool
	T, K  int
	// Out is the device address of the output buffer, OutBytes its size;
	// row (t, k) starts at Out + Off + t*TStride + k*KStride.
	Out              DevPtr
	OutBytes         int64
	Off              int64
	TStride, KStride int64
	// Offsets, when set, holds K offsets: row = id - Offsets[k].
	Offsets []int64
	// Strict runs a validation pass first: with a bad id nothing is
	// written (one more launch).
	Strict bool
	// Host chooses how a lookup whose tables are all host tables moves
	// its rows (see HostPath); it is ignored when a table is in device
	// memory. The zero value takes the context's default
	// (Context.SetHostPath; HostAuto unless set).
	Host HostPath
}

// HostPath is how a lookup from host tables moves its rows across PCIe.
type HostPath uint8

const (
	// HostAuto lets the context choose from its calibration of this
	// machine and of the tables (Context.CalibrateHost) the path predicted
	// fastest: zero-copy, CPU-staged or a split of the rows between them. A lookup on a
	// stream that is being captured always runs zero-copy.
	HostAuto HostPath = iota
	// HostZeroCopy has the kernel read the rows from the registered host
	// memory over PCIe: asynchronous and capturable, but the device
	// translates host pages row by row, so the rate falls as the rows a
	// lookup reads spread over more of the table.
	HostZeroCopy
	// HostStaged gathers the rows on the CPU (Context.StagedWorkers
	// threads) into pinned staging, chunk by chunk, while the copy engine
	// moves the previous chunks to the device on the caller's stream;
	// one device pass then places them in the output. It reads the ids
	// back first and synchronizes with the stream for that, so Lookup
	// returns once the rows have been gathered (the copies and the last
	// pass are still in flight), and it cannot be captured into a graph
	// (ErrStagedCapture).
	HostStaged
	// HostSplit runs the first tokens zero-copy (on a stream of the
	// context's, ordered with the caller's) while the CPU stages the
	// others, the split where the calibration predicts both parts to take
	// equal times: the device's translation of host pages and the CPU's
	// gather are separate limits, and side by side their rates add. It
	// synchronizes and is refused under capture as HostStaged is; a
	// strict lookup asking for it is staged whole (one part could not
	// know of a bad id in the other).
	HostSplit
)

func (h HostPath) String() string {
	switch h {
	case HostAuto:
		return "auto"
	case HostZeroCopy:
		return "zero-copy"
	case HostStaged:
		return "staged"
	case HostSplit:
		return "split"
	}
	return fmt.Sprintf("HostPath(%d)", uint8(h))
}

// TokenMajor sets the dense [T,K,R] layout over OutBytes.
func (r *Request) TokenMajor(rowBytes int) {
	r.Off, r.TStride, r.KStride = 0, int64(r.K)*int64(rowBytes), int64(rowBytes)
}

// HeadMajor sets the dense [K,T,R] layout.
func (r *Request) HeadMajor(rowBytes int) {
	r.Off, r.TStride, r.KStride = 0, int64(rowBytes), int64(r.T)*int64(rowBytes)
}

// column is what the kernel needs of one column.
type column struct {
	table  DevPtr
	rows   int64
	offset int64
}

// plan is a checked request, ready to launch.
type plan struct {
	rowBytes int64
	n        int64 // T*K
	kernel   kernelChoice
	ordered  bool // visit the rows in table order (orderMinRows)
	allHost  bool // every table is a host table: Request.Host applies
	size     int  // bytes of args the kernel takes (paramSize)
	args     [argsSize]byte
}

// The kernels' parameter block (struct sk_args in kernels/gather.cu):
// twelve 8-byte fields, then MaxColumns column descriptors of three.
const (
	argsHead  = 12 * 8
	argsOrder = 11 * 8 // the ordering scratch's address, set at launch
	argsCol   = 3 * 8
	argsSize  = argsHead + MaxColumns*argsCol
)

// check validates r against the tables' shapes and builds its launch
// parameters (status is the device address of the status word, sms the
// device's multiprocessors).
func (r *Request) check(p *plan, status DevPtr, sms int) error {
	bad := func(field, f string, a ...any) error { return &ArgError{Field: field, Reason: fmt.Sprintf(f, a...)} }
	switch {
	case r.T < 0 || r.K < 0:
		return bad("T/K", "[%d,%d]: negative", r.T, r.K)
	case r.K > MaxColumns:
		return bad("K", "%d columns, at most %d", r.K, MaxColumns)
	case len(r.Tables) != r.K:
		return bad("Tables", "%d tables for K = %d", len(r.Tables), r.K)
	case r.Offsets != nil && len(r.Offsets) != r.K:
		return bad("Offsets", "%d offsets for K = %d", len(r.Offsets), r.K)
	case r.Off < 0 || r.TStride < 0 || r.KStride < 0 || r.OutBytes < 0:
		return bad("Off/TStride/KStride/OutBytes", "negative")
	case r.Host > HostSplit:
		return bad("Host", "%s: unknown path", r.Host)
	}
	if r.T == 0 || r.K == 0 {
		p.n = 0
		return nil
	}
	if r.IDs == 0 || r.Out == 0 {
		return bad("IDs/Out", "nil device address")
	}
	var rowBytes int64
	for k, t := range r.Tables {
		if t == nil || t.ptr == 0 {
			return bad(fmt.Sprintf("Tables[%d]", k), "nil or closed table")
		}
		if k == 0 {
			rowBytes = int64(t.rowBytes)
		} else if int64(t.rowBytes) != rowBytes {
			return bad(fmt.Sprintf("Tables[%d]", k), "%d-byte rows, column 0 has %d", t.rowBytes, rowBytes)
		}
	}
	n, over := mul(int64(r.T), int64(r.K))
	if over || n > 1<<40 {
		return bad("T/K", "[%d,%d] too large", r.T, r.K)
	}
	// The last byte any row touches must lie inside the output.
	a, o1 := mul(int64(r.T-1), r.TStride)
	b, o2 := mul(int64(r.K-1), r.KStride)
	end := r.Off + a + b + rowBytes
	if o1 || o2 || end < 0 || end > r.OutBytes {
		return bad("Out", "rows reach byte %d of a %d-byte output", end, r.OutBytes)
	}
	if !disjoint(r.T, r.K, r.TStride, r.KStride, rowBytes) {
		return bad("TStride/KStride", "output rows overlap (strides %d/%d, rows of %d bytes)", r.TStride, r.KStride, rowBytes)
	}
	p.rowBytes, p.n = rowBytes, n
	addrs := [...]int64{int64(r.Out) + r.Off, r.TStride, r.KStride}
	p.kernel = pickKernel(rowBytes, addrs[:], r.Tables, n, sms)
	p.size = paramSize(r.K)
	le := binary.LittleEndian
	h := p.args[:]
	id64 := uint64(0)
	if r.IDs64 {
		id64 = 1
	}
	host, allHost := false, true
	for _, t := range r.Tables {
		host = host || t.host != nil
		allHost = allHost && t.host != nil
	}
	p.allHost = allHost
	p.ordered = host && n >= orderMinRows && n <= math.MaxUint32
	for i, v := range [...]uint64{uint64(r.IDs), uint64(r.Out) + uint64(r.Off), uint64(status),
		uint64(r.T), uint64(r.K), uint64(r.K), 1, uint64(r.TStride), uint64(r.KStride), uint64(rowBytes), id64, 0} {
		le.PutUint64(h[8*i:], v)
	}
	for k := range paramCols(r.K) {
		c := h[argsHead+k*argsCol:]
		if k >= r.K {
			clear(c[:argsCol])
			continue
		}
		t := r.Tables[k]
		var off int64
		if r.Offsets != nil {
			off = r.Offsets[k]
		}
		le.PutUint64(c[0:], uint64(t.ptr))
		le.PutUint64(c[8:], uint64(t.rows))
		le.PutUint64(c[16:], uint64(off))
	}
	return nil
}

func mul(a, b int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	return int64(lo), hi != 0 || lo > 1<<62
}

// disjoint reports whether the T x K rows of r bytes at strides ts and ks
// never overlap: exact for the layouts a lookup uses (one stride a
// multiple of the other's span, or tiles that fit between neighbours) and
// conservative otherwise.
func disjoint(t, k int, ts, ks, r int64) bool {
	if t == 1 || ts == 0 && t <= 1 {
		return k == 1 || ks >= r
	}
	if k == 1 {
		return ts >= r
	}
	// The dimension with the smaller stride must fit between two
	// neighbours of the other.
	small, smallN, big := ks, int64(k), ts
	if ts < ks {
		small, smallN, big = ts, int64(t), ks
	}
	if small < r {
		return false
	}
	span, over := mul(smallN-1, small)
	return !over && span+r <= big
}

// orderMinRows is the fewest rows a lookup from host tables must have to
// run ordered: three small kernels first sort its rows into buckets by
// where they lie in their tables, and the gather visits them in that
// order, so that rows read together share the device's translations of
// the host's pages (kernels/gather.cu, sk_order). Smaller lookups are not
// worth the three launches.
var orderMinRows int64 = 16384

// kernelChoice is a kernel (its base name, without the parameter-block
// suffix) and how many rows one warp copies per step of its loop.
type kernelChoice struct {
	name    string
	perWarp int
}

// pickKernel chooses the widest word every address allows, then the
// specialisation whose lanes cover a row (for device-table rows of 16c+8
// bytes with c <= 8, the flat kernel of 8-byte words). For rows of 16c+8 bytes it also
// chooses how many rows a warp keeps in flight: 8 for host tables (rows
// cross PCIe), else 4, but fewer when the lookup is too small to give each
// of the sms multiprocessors a warp that way, since a small lookup's
// latency is its rows' round trip and more warps on more multiprocessors
// overlap more of them (N=128 from a host table: 10.1 us with 8 rows per
// warp step, 4.8 us with 1).
func pickKernel(rowBytes int64, addrs []int64, tables []*Table, n int64, sms int) kernelChoice {
	aligned := func(w int64) bool {
		for _, a := range addrs {
			if a%w != 0 {
				return false
			}
		}
		for _, t := range tables {
			if int64(t.ptr)%w != 0 {
				return false
			}
		}
		return true
	}
	host := false
	for _, t := range tables {
		host = host || t.host != nil
	}
	maxw := func(words int64) int {
		m := (words + 31) / 32
		for _, c := range [...]int64{1, 2, 4, 8} {
			if m <= c {
				return int(c)
			}
		}
		return 0
	}
	// Steps in flight per lane for MAXW words per lane (registers bound
	// it), indexed by MAXW (1, 2, 4 or 8). Arrays and precomputed names,
	// not map literals and Sprintf: a lookup allocates nothing.
	rows := [9]int{1: 4, 2: 2, 4: 2, 8: 1}
	if rowBytes%16 == 0 && aligned(16) {
		wpr := rowBytes / 16
		switch wpr {
		case 4, 8, 16:
			return kernelChoice{name: kernelName("16", int(wpr), 1, 4), perWarp: int(32/wpr) * 4}
		}
		if m := maxw(wpr); m != 0 {
			return kernelChoice{name: kernelName("16", 32, m, rows[m]), perWarp: rows[m]}
		}
	}
	if rowBytes%16 == 8 && rowBytes >= 24 && aligned(8) {
		chunks := (rowBytes - 8) / 16
		if chunks <= 8 && !host {
			// 16 lanes a row would leave half of them or more idle: one
			// stream of 8-byte words keeps every lane busy (H200, device
			// table, R=136: 0.38 -> 0.43 of the same-size copy at N=98,304,
			// 0.58 -> 0.71 at 1M; no better at R=200, worse at 264).
			if kc, ok := flatKernel(rowBytes, 4); ok {
				return kc
			}
		}
		if chunks <= 16 {
			rows := 4
			if host {
				rows = 8
			}
			for rows > 1 && n/int64(2*rows) < int64(sms) {
				if rows == 8 {
					rows = 4
				} else {
					rows = 1
				}
			}
			return kernelChoice{name: kernelName("8x16", 16, 1, rows), perWarp: 2 * rows}
		}
		if m := maxw(chunks); m != 0 {
			return kernelChoice{name: kernelName("8x16", 32, m, rows[m]), perWarp: rows[m]}
		}
	}
	for _, w := range [...]int64{8, 4} {
		if rowBytes%w == 0 && aligned(w) {
			if m := maxw(rowBytes / w); m != 0 {
				r := [9]int{1: 4, 2: 4, 4: 2, 8: 1}[m]
				return kernelChoice{name: kernelName(wordNames[w], 32, m, r), perWarp: r}
			}
		}
	}
	return kernelChoice{name: "sk_any", perWarp: 1}
}

// kernelBases lists every kernel base name pickKernel can return.
var kernelBases = []string{
	"sk_w16_g4_m1_r4", "sk_w16_g8_m1_r4", "sk_w16_g16_m1_r4", "sk_w16_g32_m1_r4", "sk_w16_g32_m2_r2", "sk_w16_g32_m4_r2", "sk_w16_g32_m8_r1",
	"sk_w8x16_g16_m1_r4", "sk_w8x16_g16_m1_r8", "sk_w8x16_g16_m1_r1", "sk_w8x16_g32_m1_r4", "sk_w8x16_g32_m2_r2", "sk_w8x16_g32_m4_r2", "sk_w8x16_g32_m8_r1",
	"sk_w8_g32_m1_r4", "sk_w8_g32_m2_r4", "sk_w8_g32_m4_r2", "sk_w8_g32_m8_r1",
	"sk_w4_g32_m1_r4", "sk_w4_g32_m2_r4", "sk_w4_g32_m4_r2", "sk_w4_g32_m8_r1",
	"sk_wf8_g32_m4_r1", "sk_wf8_g32_m8_r1", "sk_wf8_g32_m16_r1",
	"sk_any",
}

// flatWords are the words per lane (U) of the flat kernels (sk_wf8_*).
var flatWords = [...]int{4, 8, 16}

// flatKernel is the flat gather of rows of rowBytes bytes (a multiple of
// 8) with u words a lane: a warp copies floor(32u/W) rows of W = R/8
// words a step. ok is false when a row does not fit (W > 32u) or a step
// would hold more than 32 rows (W < u), or R is not a multiple of 8.
func flatKernel(rowBytes int64, u int) (kernelChoice, bool) {
	w := rowBytes / 8
	if rowBytes%8 != 0 || w < int64(u) || w > 32*int64(u) {
		return kernelChoice{}, false
	}
	return kernelChoice{name: kernelName("f8", 32, u, 1), perWarp: int(32 * int64(u) / w)}, true
}

// kernelKey names a specialisation: word width ("16", "8x16", "8", "4"),
// lanes per row group, words per lane and rows in flight.
type kernelKey struct {
	w       string
	g, m, r int
}

// wordNames are the word widths' names in kernel names.
var wordNames = map[int64]string{16: "16", 8: "8", 4: "4"}

// kernelNames maps every specialisation of kernelBases to its name, so
// that choosing a kernel builds no string.
var kernelNames = func() map[kernelKey]string {
	m := map[kernelKey]string{}
	for _, b := range kernelBases {
		var k kernelKey
		f := strings.Split(strings.TrimPrefix(b, "sk_w"), "_")
		if len(f) != 4 {
			continue // sk_any
		}
		k.w = f[0]
		if _, err := fmt.Sscanf(f[1]+" "+f[2]+" "+f[3], "g%d m%d r%d", &k.g, &k.m, &k.r); err != nil {
			panic("cudagather: kernel base name " + b + ": " + err.Error())
		}
		m[k] = b
	}
	return m
}()

// kernelName is the specialisation's name; one outside kernelBases (a
// bug, which TestKernelNames guards against) gets its name built, and
// its launch then reports it missing from the module.
func kernelName(w string, g, m, r int) string {
	if n, ok := kernelNames[kernelKey{w, g, m, r}]; ok {
		return n
	}
	return fmt.Sprintf("sk_w%s_g%d_m%d_r%d", w, g, m, r)
}

// paramCols is the column capacity of the parameter block for K columns:
// 8 (a 280-byte block) or MaxColumns (1624 bytes).
func paramCols(k int) int {
	if k <= 8 {
		return 8
	}
	return MaxColumns
}

// paramSize is the parameter block's size for K columns.
func paramSize(k int) int { return argsHead + paramCols(k)*argsCol }

// statusIndex decodes a nonzero status word into the flat index of the
// first bad id.
func statusIndex(v uint64) int64 { return int64(1<<62 - v) }
