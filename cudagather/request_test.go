package cudagather

import (
	"encoding/binary"
	"errors"
	"testing"
)

func TestRequestCheck(t *testing.T) {
	tab := &Table{ptr: 0x10000, rows: 100, rowBytes: 264}
	tab2 := &Table{ptr: 0x90000, rows: 50, rowBytes: 264}
	odd := &Table{ptr: 0x20000, rows: 100, rowBytes: 128}
	good := func() *Request {
		r := &Request{Tables: []*Table{tab, tab2, tab}, IDs: 0x1000, T: 4, K: 3, Out: 0x40000, OutBytes: 4 * 3 * 264}
		r.TokenMajor(264)
		return r
	}
	cases := []struct {
		name string
		edit func(*Request)
		ok   bool
	}{
		{"good", func(*Request) {}, true},
		{"head-major", func(r *Request) { r.HeadMajor(264) }, true},
		{"padded", func(r *Request) { r.TStride = 3*264 + 64; r.OutBytes = 4 * (3*264 + 64) }, true},
		{"empty", func(r *Request) { r.T = 0 }, true},
		{"negative T", func(r *Request) { r.T = -1 }, false},
		{"too many columns", func(r *Request) { r.K = MaxColumns + 1 }, false},
		{"tables vs K", func(r *Request) { r.Tables = r.Tables[:2] }, false},
		{"offsets vs K", func(r *Request) { r.Offsets = []int64{1} }, false},
		{"nil table", func(r *Request) { r.Tables[1] = nil }, false},
		{"closed table", func(r *Request) { r.Tables[1] = &Table{rows: 1, rowBytes: 264} }, false},
		{"row sizes differ", func(r *Request) { r.Tables[1] = odd }, false},
		{"output too small", func(r *Request) { r.OutBytes-- }, false},
		{"rows overlap", func(r *Request) { r.KStride = 200 }, false},
		{"tokens overlap", func(r *Request) { r.TStride = 264 }, false},
		{"negative stride", func(r *Request) { r.KStride = -264 }, false},
		{"nil ids", func(r *Request) { r.IDs = 0 }, false},
		{"nil out", func(r *Request) { r.Out = 0 }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := good()
			tc.edit(r)
			var p plan
			err := r.check(&p, 0x8, 132)
			if tc.ok != (err == nil) {
				t.Fatalf("check: %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("%v does not wrap ErrInvalid", err)
			}
		})
	}
}

// TestOrderedPlan: lookups that read a host table and have at least
// orderMinRows rows run ordered; device-only lookups never do.
func TestOrderedPlan(t *testing.T) {
	dev := &Table{ptr: 0x10000, rows: 1 << 20, rowBytes: 64}
	host := &Table{ptr: 0x20000, rows: 1 << 20, rowBytes: 64, host: make([]byte, 1)}
	for _, tc := range []struct {
		tabs []*Table
		t    int
		want bool
	}{
		{[]*Table{dev, dev}, int(orderMinRows), false},
		{[]*Table{host, host}, int(orderMinRows) / 2, true},
		{[]*Table{dev, host}, int(orderMinRows) / 2, true},
		{[]*Table{dev, host}, int(orderMinRows)/2 - 1, false},
	} {
		r := &Request{Tables: tc.tabs, IDs: 0x1000, T: tc.t, K: 2, Out: 0x40000, OutBytes: int64(tc.t) * 2 * 64}
		r.TokenMajor(64)
		var p plan
		if err := r.check(&p, 0x8, 132); err != nil {
			t.Fatal(err)
		}
		if p.ordered != tc.want {
			t.Errorf("T=%d, host tables %v: ordered %v", tc.t, tc.tabs[1].host != nil, p.ordered)
		}
	}
}

func TestArgsLayout(t *testing.T) {
	a := &Table{ptr: 0x10000, rows: 100, rowBytes: 64}
	b := &Table{ptr: 0x20000, rows: 7, rowBytes: 64}
	r := &Request{Tables: []*Table{a, b}, IDs: 0x1000, IDs64: true, T: 3, K: 2, Out: 0x40000, OutBytes: 1 << 20,
		Offsets: []int64{5, 9}}
	r.HeadMajor(64)
	r.Off = 128
	var p plan
	if err := r.check(&p, 0x8, 132); err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	want := []uint64{0x1000, 0x40000 + 128, 0x8, 3, 2, 2, 1, 64, 3 * 64, 64, 1, 0}
	if argsOrder != 8*(len(want)-1) || argsHead != 8*len(want) {
		t.Errorf("order field at %d, head %d bytes", argsOrder, argsHead)
	}
	for i, w := range want {
		if got := le.Uint64(p.args[8*i:]); got != w {
			t.Errorf("field %d = %#x, want %#x", i, got, w)
		}
	}
	col := func(k, f int) uint64 { return le.Uint64(p.args[argsHead+k*argsCol+8*f:]) }
	if col(0, 0) != 0x10000 || col(0, 1) != 100 || col(0, 2) != 5 || col(1, 0) != 0x20000 || col(1, 1) != 7 || col(1, 2) != 9 {
		t.Errorf("columns: %#x %d %d %#x %d %d", col(0, 0), col(0, 1), col(0, 2), col(1, 0), col(1, 1), col(1, 2))
	}
	if col(2, 0) != 0 || col(7, 1) != 0 {
		t.Error("unused columns not zero")
	}
	if p.size != argsHead+8*argsCol {
		t.Errorf("parameter block of %d bytes for K=2", p.size)
	}
	if p.n != 6 || p.rowBytes != 64 {
		t.Errorf("n %d rowBytes %d", p.n, p.rowBytes)
	}
}

func TestPickKernel(t *testing.T) {
	at := func(p DevPtr) []*Table { return []*Table{{ptr: p}} }
	host := []*Table{{ptr: 0x1000, host: make([]byte, 1)}}
	cases := []struct {
		r     int64
		addrs []int64
		tabs  []*Table
		want  string
	}{
		{64, []int64{0, 64, 1536}, at(0x1000), "sk_w16_g4_m1_r4"},
		{128, []int64{0, 128}, at(0x1000), "sk_w16_g8_m1_r4"},
		{256, []int64{0, 256}, at(0x1000), "sk_w16_g16_m1_r4"},
		{512, []int64{0, 512}, at(0x1000), "sk_w16_g32_m1_r4"},
		{1024, []int64{0, 1024}, at(0x1000), "sk_w16_g32_m2_r2"},
		{4096, []int64{0, 4096}, at(0x1000), "sk_w16_g32_m8_r1"},
		{264, []int64{0, 264}, at(0x1000), "sk_w8x16_g16_m1_r4"},
		{264, []int64{0, 264}, host, "sk_w8x16_g16_m1_r8"},
		{-128, []int64{0, 264}, host, "sk_w8x16_g16_m1_r1"},
		{-4096, []int64{0, 264}, host, "sk_w8x16_g16_m1_r8"},
		{-2048, []int64{0, 264}, host, "sk_w8x16_g16_m1_r4"},
		{-1024, []int64{0, 264}, at(0x1000), "sk_w8x16_g16_m1_r1"},
		{520, []int64{0, 520}, at(0x1000), "sk_w8x16_g32_m1_r4"},
		{136, []int64{0, 136}, at(0x1000), "sk_wf8_g32_m4_r1"},
		{72, []int64{0, 72}, at(0x1000), "sk_wf8_g32_m4_r1"},
		{136, []int64{0, 136}, host, "sk_w8x16_g16_m1_r8"},
		{200, []int64{0, 200}, at(0x1000), "sk_w8x16_g16_m1_r4"},
		{64, []int64{8, 64}, at(0x1000), "sk_w8_g32_m1_r4"},
		{300, []int64{0, 300}, at(0x1000), "sk_w4_g32_m4_r2"},
		{301, []int64{0, 301}, at(0x1000), "sk_any"},
		{264, []int64{0, 264}, at(0x1004), "sk_w4_g32_m4_r2"},
		{1 << 20, []int64{0}, at(0x1000), "sk_any"},
	}
	for _, tc := range cases {
		// A negative r is R=264 with -r rows: small lookups on 132 SMs.
		r, n := tc.r, int64(1<<20)
		if r < 0 {
			r, n = 264, -r
		}
		got := pickKernel(r, tc.addrs, tc.tabs, n, 132)
		if got.name != tc.want {
			t.Errorf("R=%d n=%d addrs %v: %s, want %s", r, n, tc.addrs, got.name, tc.want)
		}
		found := false
		for _, b := range kernelBases {
			found = found || b == got.name
		}
		if !found {
			t.Errorf("%s is not in kernelBases", got.name)
		}
	}
	if statusIndex(1<<62-5) != 5 {
		t.Error("statusIndex")
	}
}

// TestKernelNames: every specialisation of kernelBases is found by its
// parts, and choosing a kernel allocates nothing (it runs on every
// lookup; a Sprintf per call was one of a device lookup's allocations).
func TestKernelNames(t *testing.T) {
	if len(kernelNames) != len(kernelBases)-1 {
		t.Errorf("%d names parsed from %d bases (all but sk_any)", len(kernelNames), len(kernelBases))
	}
	for k, name := range kernelNames {
		if got := kernelName(k.w, k.g, k.m, k.r); got != name {
			t.Errorf("%+v: %s, want %s", k, got, name)
		}
	}
	if got := kernelName("2", 1, 1, 1); got != "sk_w2_g1_m1_r1" {
		t.Errorf("an unknown specialisation is named %s", got)
	}
	tabs := []*Table{{ptr: 0x1000, host: make([]byte, 1)}}
	for _, r := range []int64{64, 128, 264, 300, 520, 1024, 4096} {
		addrs := []int64{0, r}
		for _, n := range []int64{128, 1 << 20} {
			if a := testing.AllocsPerRun(100, func() { pickKernel(r, addrs, tabs, n, 132) }); a != 0 {
				t.Errorf("pickKernel R=%d n=%d: %v allocations", r, n, a)
			}
		}
	}
}

func TestCheckTable(t *testing.T) {
	if err := checkTable(make([]byte, 100), 10, 10); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][3]int{{99, 10, 10}, {100, 0, 10}, {100, 10, 0}, {100, 11, 10}} {
		if err := checkTable(make([]byte, c[0]), int64(c[1]), c[2]); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: %v", c, err)
		}
	}
}

// TestCalibrationClass: tables of one row size whose spans lie within the
// same power of two share a calibration class; another row size, or a
// span twice as large, does not.
func TestCalibrationClass(t *testing.T) {
	a := &Table{rows: 1000, rowBytes: 264}
	b := &Table{rows: 1500, rowBytes: 264} // 396,000 bytes: the same power of two as 264,000
	c := &Table{rows: 2000, rowBytes: 264} // 528,000: the next one
	d := &Table{rows: 1000, rowBytes: 200} // another row size
	if classOf(a) != classOf(b) {
		t.Errorf("%+v and %+v: different classes", classOf(a), classOf(b))
	}
	if classOf(a) == classOf(c) || classOf(a) == classOf(d) {
		t.Errorf("classes %+v, %+v, %+v not distinct", classOf(a), classOf(c), classOf(d))
	}
}
