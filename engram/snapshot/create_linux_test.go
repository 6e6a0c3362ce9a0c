//go:build linux

package snapshot

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// chopReader returns a source's bytes in reads of random sizes.
type chopReader struct {
	src   []byte
	seed  uint64
	calls int
	maxP  int // the largest buffer it was handed
}

func (r *chopReader) Read(p []byte) (int, error) {
	r.maxP = max(r.maxP, len(p))
	if len(r.src) == 0 {
		return 0, io.EOF
	}
	r.calls++
	r.seed = r.seed*6364136223846793005 + 1442695040888963407
	n := min(len(p), len(r.src), 1+int(r.seed>>33)%(3*len(p)/2+1))
	copy(p, r.src[:n])
	r.src = r.src[n:]
	return n, nil
}

// openVerified opens a table and checks it holds exactly rows.
func openVerified(t testing.TB, dir string, spec Spec, rows []byte, opts *OpenOptions) *Table {
	t.Helper()
	tbl, err := Open(dir, spec.Name, &spec, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, tbl.Close()) })
	require.Equal(t, spec, tbl.Spec)
	require.Equal(t, filepath.Join(dir, FileName(spec.Name)), tbl.Path)
	require.Len(t, tbl.Rows, int(spec.Size()))
	require.Equal(t, len(tbl.Rows), cap(tbl.Rows), "no capacity past the rows")
	require.True(t, bytes.Equal(rows, tbl.Rows), "rows differ")
	return tbl
}

func TestCreateOpenRoundTrip(t *testing.T) {
	rng := newRand(t)
	for _, tc := range []struct {
		desc  string
		spec  Spec
		block int
		chunk int
	}{
		{"one byte", Spec{Name: "b", NumRows: 1, RowBytes: 1}, 0, 0},
		{"one engram row", Spec{Name: "r", NumRows: 1, RowBytes: 264}, 0, 0},
		{"engram rows", Spec{Name: "engram.l3", NumRows: 5000, RowBytes: 264}, 0, 0},
		{"small blocks odd chunks", Spec{Name: "odd", NumRows: 3001, RowBytes: 264}, MinBlockBytes, 1000},
		{"rows over a block", Spec{Name: "wide", NumRows: 7, RowBytes: 9000}, MinBlockBytes, 4096},
		{"tiny rows", Spec{Name: "tiny", NumRows: 100_003, RowBytes: 3}, 5000, 777},
		{"one-byte chunks", Spec{Name: "slow", NumRows: 50, RowBytes: 10}, 0, 1},
		{"parallel verify", Spec{Name: "big", NumRows: 160_000, RowBytes: 264}, 64 << 10, 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			key := rng.Uint64()
			rows := makeRows(tc.spec, key)
			opts := &CreateOptions{BlockBytes: tc.block, ChunkBytes: tc.chunk}
			for _, from := range []string{"bytes", "reader"} {
				dir := newDir(t, from)
				if from == "bytes" {
					require.NoError(t, Create(dir, tc.spec, rows, opts))
				} else {
					src := &chopReader{src: rows, seed: key}
					require.NoError(t, CreateFrom(dir, tc.spec, src, opts))
					require.Empty(t, src.src, "read the whole source")
				}
				require.Equal(t, []string{FileName(tc.spec.Name)}, entries(t, dir), "one file, nothing else")
				st, err := os.Stat(filepath.Join(dir, FileName(tc.spec.Name)))
				require.NoError(t, err)
				require.Equal(t, DefaultPerm, st.Mode().Perm())

				tbl := openVerified(t, dir, tc.spec, rows, &OpenOptions{Pin: PinBestEffort})
				require.True(t, tbl.Verified)
				require.Equal(t, st.Size(), tbl.Header.FileSize)
				checkLayout(t, &tbl.Header)
				for _, i := range []int64{0, tc.spec.NumRows - 1, rng.Int64N(tc.spec.NumRows)} {
					rb := int64(tc.spec.RowBytes)
					require.Equal(t, rows[i*rb:(i+1)*rb], tbl.Row(i))
				}
				require.Nil(t, tbl.Row(-1))
				require.Nil(t, tbl.Row(tc.spec.NumRows))

				// Persistence: close, reopen without an expected spec.
				require.NoError(t, tbl.Close())
				require.Nil(t, tbl.Rows)
				require.Nil(t, tbl.Row(0))
				require.NoError(t, tbl.Close(), "Close is idempotent")
				again := openVerified(t, dir, tc.spec, rows, nil)
				require.False(t, again.Locked)
				require.NoError(t, Verify(again.Path))
				h, err := ReadHeader(again.Path)
				require.NoError(t, err)
				require.Equal(t, again.Header, h)
				specs, err := List(dir)
				require.NoError(t, err)
				require.Equal(t, []Spec{tc.spec}, specs)
			}
		})
	}
}

// TestCreateWritesFromTheSlice checks that Create never copies the rows:
// every row write hands the file system a piece of the caller's slice.
func TestCreateWritesFromTheSlice(t *testing.T) {
	spec := Spec{Name: "nocopy", NumRows: 4000, RowBytes: 264}
	rows := makeRows(spec, 7)
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(rows)))
	hi := lo + uintptr(len(rows))
	var rowWrites, rowBytes int
	fsys := &faultFS{inner: OS, onWrite: func(p []byte, off int64) {
		if off == 0 {
			return // header and checksum table
		}
		a := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
		require.True(t, lo <= a && a+uintptr(len(p)) <= hi, "a row write not from the caller's slice")
		rowWrites++
		rowBytes += len(p)
	}}
	dir := newDir(t, "d")
	require.NoError(t, Create(dir, spec, rows, &CreateOptions{FS: fsys, ChunkBytes: 100_000}))
	require.Equal(t, 11, rowWrites, "ceil(1056000 / 100000) writes")
	require.Equal(t, len(rows), rowBytes)
	openVerified(t, dir, spec, rows, nil)
}

// TestCreateFromBoundedMemory streams a table far larger than the chunk
// and checks that the heap grows by about one chunk, not by the table, and
// that bytes past the table stay unread.
func TestCreateFromBoundedMemory(t *testing.T) {
	spec := Spec{Name: "stream", NumRows: 64 << 10, RowBytes: 256} // 16 MiB
	rows := makeRows(spec, 11)
	const chunk = 64 << 10
	trailer := []byte("the next table")
	src := &chopReader{src: append(bytes.Clone(rows), trailer...), seed: 3}
	dir := newDir(t, "d")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	require.NoError(t, CreateFrom(dir, spec, src, &CreateOptions{ChunkBytes: chunk}))
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("CreateFrom of %d bytes allocated %d bytes", spec.Size(), allocated)
	require.Less(t, allocated, uint64(4*chunk+(1<<20)/MinBlockBytes*4), "heap bounded by the chunk, not the table")
	require.LessOrEqual(t, src.maxP, chunk)
	require.Equal(t, trailer, src.src, "bytes after the table are left unread")
	openVerified(t, dir, spec, rows, nil)
}

func TestCreateRefusesBadInput(t *testing.T) {
	good := Spec{Name: "t", NumRows: 10, RowBytes: 8}
	rows := makeRows(good, 5)
	dir := newDir(t, "d")
	for _, tc := range []struct {
		desc string
		run  func() error
		err  error
	}{
		{"bad name", func() error { return Create(dir, Spec{Name: "../t", NumRows: 10, RowBytes: 8}, rows, nil) }, ErrBadName},
		{"bad spec", func() error { return Create(dir, Spec{Name: "t", NumRows: 0, RowBytes: 8}, nil, nil) }, ErrBadSpec},
		{"bad spec from reader", func() error {
			return CreateFrom(dir, Spec{Name: "t", NumRows: 10, RowBytes: -1}, bytes.NewReader(rows), nil)
		}, ErrBadSpec},
		{"rows short", func() error { return Create(dir, good, rows[:79], nil) }, ErrSourceSize},
		{"rows long", func() error { return Create(dir, good, append(bytes.Clone(rows), 1), nil) }, ErrSourceSize},
		{"block too small", func() error { return Create(dir, good, rows, &CreateOptions{BlockBytes: MinBlockBytes - 1}) }, ErrBadOptions},
		{"block too large", func() error { return Create(dir, good, rows, &CreateOptions{BlockBytes: MaxBlockBytes + 1}) }, ErrBadOptions},
		{"negative chunk", func() error { return Create(dir, good, rows, &CreateOptions{ChunkBytes: -1}) }, ErrBadOptions},
		{"huge chunk", func() error { return Create(dir, good, rows, &CreateOptions{ChunkBytes: MaxChunkBytes + 1}) }, ErrBadOptions},
		{"perm with type bits", func() error { return Create(dir, good, rows, &CreateOptions{Perm: fs.ModeDir | 0o444}) }, ErrBadOptions},
		{"short source", func() error { return CreateFrom(dir, good, bytes.NewReader(rows[:79]), nil) }, ErrSourceSize},
		{"empty source", func() error { return CreateFrom(dir, good, bytes.NewReader(nil), nil) }, io.ErrUnexpectedEOF},
		{"failing source", func() error {
			return CreateFrom(dir, good, io.MultiReader(bytes.NewReader(rows[:40]), iotestErrReader{}), nil)
		}, errInjected},
		{"missing directory", func() error { return Create(filepath.Join(dir, "nope"), good, rows, nil) }, fs.ErrNotExist},
		{"directory is a file", func() error { return Create("/proc/self/status", good, rows, nil) }, nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := tc.run()
			require.Error(t, err)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
			}
			t.Log(err)
			require.Empty(t, entries(t, dir), "nothing left behind")
		})
	}
	var se *SourceError
	require.ErrorAs(t, CreateFrom(dir, good, bytes.NewReader(rows[:79]), nil), &se)
	require.Equal(t, SourceError{Table: "t", Want: 80, Got: 79, Err: io.ErrUnexpectedEOF}, *se)
	var oe *OpError
	require.ErrorAs(t, CreateFrom(dir, good, io.MultiReader(bytes.NewReader(rows[:40]), iotestErrReader{}), nil), &oe)
	require.Equal(t, "read rows from source at byte 40", oe.Step)
	require.NoError(t, Create(dir, good, rows, nil), "the directory is still usable")
}

type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errInjected }

func TestCreateExisting(t *testing.T) {
	spec := Spec{Name: "t", NumRows: 100, RowBytes: 64}
	first := makeRows(spec, 1)
	second := makeRows(spec, 2)
	for _, tc := range []struct {
		desc string
		fsys *faultFS
		step string
	}{
		{"seen early", &faultFS{inner: OS}, "check name"},
		{"race on link", &faultFS{inner: OS, hideExisting: true}, "publish"},
		{"race on rename", &faultFS{inner: OS, hideExisting: true, noTmpFile: true}, "publish"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir := newDir(t, "d")
			require.NoError(t, Create(dir, spec, first, nil))
			for _, create := range []func() error{
				func() error { return Create(dir, spec, second, &CreateOptions{FS: tc.fsys}) },
				func() error { return CreateFrom(dir, spec, bytes.NewReader(second), &CreateOptions{FS: tc.fsys}) },
			} {
				err := create()
				require.ErrorIs(t, err, ErrExists)
				var oe *OpError
				require.ErrorAs(t, err, &oe)
				require.Equal(t, tc.step, oe.Step)
				require.Equal(t, "create", oe.Op)
				require.Equal(t, []string{FileName(spec.Name)}, entries(t, dir), "no temporary file left")
				openVerified(t, dir, spec, first, nil)
			}
		})
	}
}

// TestCreateFaults injects a failure into every file system call Create
// makes, in both publishing paths and for both sources, and checks that
// the error names the step and wraps the cause, that nothing at all is
// left in the directory, and that the same Create then succeeds.
func TestCreateFaults(t *testing.T) {
	spec := Spec{Name: "faulty", NumRows: 3000, RowBytes: 264} // 792000 bytes
	rows := makeRows(spec, 9)
	opts := func(f *faultFS) *CreateOptions {
		return &CreateOptions{FS: f, ChunkBytes: 300_000, BlockBytes: 64 << 10}
	}
	steps := map[string]string{
		"OpenDir":             "open directory",
		"Dir.Exists":          "check name",
		"Dir.CreateTemp":      "create temporary file",
		"Dir.CreateExclusive": "create temporary file",
		"File.Allocate":       "allocate",
		"File.WriteAt":        "write ",
		"File.Sync":           "sync file",
		"Dir.Link":            "publish",
		"Dir.Rename":          "publish",
		"File.Close":          "close file",
		"Dir.Sync":            "sync directory",
	}
	for _, fallback := range []bool{false, true} {
		for _, from := range []string{"bytes", "reader"} {
			name := map[bool]string{false: "tmpfile", true: "rename"}[fallback] + "/" + from
			run := func(f *faultFS, dir string) error {
				if from == "bytes" {
					return Create(dir, spec, rows, opts(f))
				}
				return CreateFrom(dir, spec, bytes.NewReader(rows), opts(f))
			}
			t.Run(name, func(t *testing.T) {
				clean := &faultFS{inner: OS, noTmpFile: fallback}
				dir := newDir(t, "clean")
				require.NoError(t, run(clean, dir))
				calls := clean.calls()
				t.Logf("calls: %v", calls)
				require.Equal(t, 4, strings.Count(strings.Join(calls, " "), "File.WriteAt"), "3 row chunks and the header")
				for i, call := range calls {
					kinds := []faultKind{faultErr}
					if call == "File.WriteAt" {
						kinds = append(kinds, faultShort, faultPartial)
					}
					for _, kind := range kinds {
						dir := newDir(t, "fault")
						f := &faultFS{inner: OS, noTmpFile: fallback, faults: map[int]faultKind{i: kind}}
						err := run(f, dir)
						if call == "Dir.Close" {
							// Closing the directory loses nothing: the
							// table is published and durable.
							require.NoError(t, err)
							openVerified(t, dir, spec, rows, nil)
							continue
						}
						require.Error(t, err, "call %d %s %v", i, call, kind)
						if kind == faultShort {
							require.ErrorIs(t, err, io.ErrShortWrite)
						} else {
							require.ErrorIs(t, err, errInjected)
						}
						var oe *OpError
						require.ErrorAs(t, err, &oe)
						require.True(t, strings.HasPrefix(oe.Step, steps[call]), "call %s: step %q", call, oe.Step)
						require.NoError(t, oe.CleanupErr)
						require.Contains(t, err.Error(), spec.Name)
						require.Empty(t, entries(t, dir), "call %d %s %v left files behind", i, call, kind)
						specs, err := List(dir)
						require.NoError(t, err)
						require.Empty(t, specs)
						_, err = Open(dir, spec.Name, nil, nil)
						require.ErrorIs(t, err, ErrNotExist)

						require.NoError(t, run(&faultFS{inner: OS, noTmpFile: fallback}, dir), "the same Create then succeeds")
						openVerified(t, dir, spec, rows, nil)
					}
				}
			})
		}
	}
}

// TestCreateCleanupFaults fails a step and then the cleanup after it: the
// error reports both, and whatever remains is never a visible table.
func TestCreateCleanupFaults(t *testing.T) {
	spec := Spec{Name: "faulty", NumRows: 100, RowBytes: 264}
	rows := makeRows(spec, 4)
	var cases, keptTable, keptTemp int
	for _, fallback := range []bool{false, true} {
		clean := &faultFS{inner: OS, noTmpFile: fallback}
		require.NoError(t, Create(newDir(t, "clean"), spec, rows, &CreateOptions{FS: clean}))
		calls := clean.calls()
		for i, call := range calls {
			if call == "Dir.Close" {
				continue
			}
			// Run with the fault once to learn the cleanup calls, then
			// fail each of them too.
			probe := &faultFS{inner: OS, noTmpFile: fallback, faults: map[int]faultKind{i: faultErr}}
			require.Error(t, Create(newDir(t, "probe"), spec, rows, &CreateOptions{FS: probe}))
			for k, c := range probe.calls()[i+1:] {
				if c == "Dir.Close" {
					continue
				}
				j := i + 1 + k
				cases++
				dir := newDir(t, "fault")
				f := &faultFS{inner: OS, noTmpFile: fallback, faults: map[int]faultKind{i: faultErr, j: faultErr}}
				err := Create(dir, spec, rows, &CreateOptions{FS: f})
				var oe *OpError
				require.ErrorAs(t, err, &oe, "fallback %v: %s then %s", fallback, call, c)
				require.ErrorIs(t, oe.CleanupErr, errInjected)
				require.Contains(t, err.Error(), "cleanup failed too")
				specs, lerr := List(dir)
				require.NoError(t, lerr)
				left := entries(t, dir)
				if len(specs) == 1 {
					// Removing the just-published name failed: it is the
					// complete table.
					require.Equal(t, []Spec{spec}, specs)
					openVerified(t, dir, spec, rows, nil)
					keptTable++
					continue
				}
				require.Empty(t, specs)
				if len(left) > 0 {
					keptTemp++
				}
				removed, err := CleanTemp(dir)
				require.NoError(t, err)
				require.Equal(t, left, removed, "only hidden temporary files remain, and CleanTemp removes them")
				require.Empty(t, entries(t, dir))
			}
		}
	}
	t.Logf("%d double faults: %d left the complete table, %d a hidden temporary file", cases, keptTable, keptTemp)
	require.NotZero(t, keptTable)
	require.NotZero(t, keptTemp)
}

// TestCreateShortSourceCleanupFault: a short source, then a failed
// removal of the temporary file; the error carries both.
func TestCreateShortSourceCleanupFault(t *testing.T) {
	spec := Spec{Name: "short", NumRows: 100, RowBytes: 264}
	dir := newDir(t, "d")
	// OpenDir, Dir.Exists, Dir.CreateExclusive, File.Allocate, File.Close, Dir.Remove
	f := &faultFS{inner: OS, noTmpFile: true, faults: map[int]faultKind{5: faultErr}}
	err := CreateFrom(dir, spec, bytes.NewReader(makeRows(spec, 1)[:10]), &CreateOptions{FS: f})
	require.Equal(t, "Dir.Remove", f.calls()[5])
	require.ErrorIs(t, err, ErrSourceSize)
	var oe *OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "read rows from source", oe.Step)
	require.ErrorIs(t, oe.CleanupErr, errInjected)
	specs, err := List(dir)
	require.NoError(t, err)
	require.Empty(t, specs)
	removed, err := CleanTemp(dir)
	require.NoError(t, err)
	require.Len(t, removed, 1)
	require.Empty(t, entries(t, dir))
}

func TestRemove(t *testing.T) {
	spec := Spec{Name: "gone", NumRows: 300, RowBytes: 264}
	rows := makeRows(spec, 8)
	dir := newDir(t, "d")
	require.NoError(t, Create(dir, spec, rows, nil))
	held := openVerified(t, dir, spec, rows, &OpenOptions{Pin: PinBestEffort})

	require.NoError(t, Remove(dir, spec.Name, nil))
	require.Empty(t, entries(t, dir))
	require.True(t, bytes.Equal(rows, held.Rows), "an open table stays valid after Remove")
	_, err := Open(dir, spec.Name, nil, nil)
	require.ErrorIs(t, err, ErrNotExist)
	require.ErrorIs(t, err, fs.ErrNotExist)

	err = Remove(dir, spec.Name, nil)
	require.ErrorIs(t, err, ErrNotExist)
	var oe *OpError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "remove", oe.Op)
	require.ErrorIs(t, Remove(dir, "../x", nil), ErrBadName)
	require.ErrorIs(t, Remove(filepath.Join(dir, "nope"), spec.Name, nil), fs.ErrNotExist)

	// A new table may take the name again.
	rows2 := makeRows(spec, 9)
	require.NoError(t, Create(dir, spec, rows2, nil))
	openVerified(t, dir, spec, rows2, nil)

	for _, tc := range []struct {
		call string
		gone bool // the table is unlinked despite the error
	}{
		{"OpenDir", false}, {"Dir.Remove", false}, {"Dir.Sync", true},
	} {
		t.Run(tc.call, func(t *testing.T) {
			dir := newDir(t, "d")
			require.NoError(t, Create(dir, spec, rows, nil))
			idx := map[string]int{"OpenDir": 0, "Dir.Remove": 1, "Dir.Sync": 2}[tc.call]
			f := &faultFS{inner: OS, faults: map[int]faultKind{idx: faultErr}}
			err := Remove(dir, spec.Name, &RemoveOptions{FS: f})
			require.ErrorIs(t, err, errInjected)
			require.Equal(t, tc.call, f.calls()[idx])
			require.Equal(t, tc.gone, len(entries(t, dir)) == 0)
			if !tc.gone {
				openVerified(t, dir, spec, rows, nil)
			}
		})
	}
	f := &faultFS{inner: OS, faults: map[int]faultKind{3: faultErr}}
	require.NoError(t, Remove(dir, spec.Name, &RemoveOptions{FS: f}), "a failed directory close loses nothing")
	require.Equal(t, "Dir.Close", f.calls()[3])
}

func TestListAndCleanTemp(t *testing.T) {
	dir := newDir(t, "ns")
	specs := []Spec{
		{Name: "b-2", NumRows: 10, RowBytes: 3},
		{Name: "a", NumRows: 5, RowBytes: 264},
		{Name: "a-b", NumRows: 7, RowBytes: 1},
	}
	for i, s := range specs {
		require.NoError(t, Create(dir, s, makeRows(s, uint64(i)), nil))
	}
	// Things List must skip: a leftover temporary file, a held one, other
	// files, a hidden table-like file, a directory without the extension.
	stale := filepath.Join(dir, tempName(FileName("c")))
	require.NoError(t, os.WriteFile(stale, []byte("partial"), 0o444))
	held := filepath.Join(dir, tempName(FileName("d")))
	f := &faultFS{inner: OS}
	d, err := f.OpenDir(dir)
	require.NoError(t, err)
	hf, err := d.CreateExclusive(filepath.Base(held), 0o444)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".x.engram"), []byte("x"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))

	got, err := List(dir)
	require.NoError(t, err)
	require.Equal(t, []Spec{specs[1], specs[2], specs[0]}, got, "sorted by name")

	// A damaged table is reported, the others still listed.
	bad := filepath.Join(dir, FileName("bad"))
	require.NoError(t, os.WriteFile(bad, []byte("\x89ENGRAM\nnot really"), 0o444))
	got, err = List(dir)
	require.ErrorIs(t, err, ErrTruncated)
	require.Contains(t, err.Error(), bad)
	require.Len(t, got, 3)
	require.NoError(t, os.Remove(bad))

	removed, err := CleanTemp(dir)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Base(stale)}, removed, "the held temporary file stays")
	require.FileExists(t, held)
	require.NoError(t, hf.Close())
	require.NoError(t, d.Close())
	removed, err = CleanTemp(dir)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Base(held)}, removed, "released, it goes")

	_, err = List(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = CleanTemp(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// cleanRaceFS is OS with CleanTemp run once in the window between the
// creation of a hidden temporary file and its lock.
type cleanRaceFS struct {
	removed *[]string
	errs    *[]error
}

func (c cleanRaceFS) OpenDir(path string) (Dir, error) {
	d, err := OS.OpenDir(path)
	if err == nil {
		ran := false
		d.(*osDir).beforeLock = func() {
			if !ran {
				ran = true
				removed, err := CleanTemp(path)
				*c.removed = append(*c.removed, removed...)
				*c.errs = append(*c.errs, err)
			}
		}
	}
	return d, err
}

// TestCleanTempBeforeLock runs CleanTemp after a fallback Create has made
// its hidden temporary file but before it holds the lock, the one moment
// CleanTemp can take a live writer's file: Create must notice, make the
// file again and publish the table.
func TestCleanTempBeforeLock(t *testing.T) {
	spec := Spec{Name: "race", NumRows: 100, RowBytes: 264}
	rows := makeRows(spec, 41)
	dir := newDir(t, "d")
	var removed []string
	var errs []error
	f := &faultFS{inner: cleanRaceFS{removed: &removed, errs: &errs}, noTmpFile: true}
	require.NoError(t, Create(dir, spec, rows, &CreateOptions{FS: f}))
	require.Len(t, removed, 1, "CleanTemp took the unlocked file")
	require.Equal(t, spec.Name, tempTable(removed[0]))
	require.Equal(t, []error{nil}, errs)
	openVerified(t, dir, spec, rows, nil)
	require.Equal(t, []string{FileName(spec.Name)}, entries(t, dir))
}

// procLinkFS is OS with Link forced onto its /proc fallback.
type procLinkFS struct{}

func (procLinkFS) OpenDir(path string) (Dir, error) {
	d, err := OS.OpenDir(path)
	if err == nil {
		d.(*osDir).procLink = true
	}
	return d, err
}

// TestLinkThroughProc publishes through linkat of /proc/self/fd/N, the
// path taken where AT_EMPTY_PATH is refused, create-only as well.
func TestLinkThroughProc(t *testing.T) {
	spec := Spec{Name: "proc", NumRows: 100, RowBytes: 264}
	rows := makeRows(spec, 31)
	dir := newDir(t, "d")
	require.NoError(t, Create(dir, spec, rows, &CreateOptions{FS: procLinkFS{}}))
	openVerified(t, dir, spec, rows, nil)
	f := &faultFS{inner: procLinkFS{}, hideExisting: true}
	require.ErrorIs(t, Create(dir, spec, makeRows(spec, 32), &CreateOptions{FS: f}), ErrExists)
	require.Contains(t, f.calls(), "Dir.Link")
	openVerified(t, dir, spec, rows, nil)
	require.Equal(t, []string{FileName(spec.Name)}, entries(t, dir))
}
