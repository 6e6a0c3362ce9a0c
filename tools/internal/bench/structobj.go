package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/scatterkit/scatterkit/structobj"
	"github.com/scatterkit/scatterkit/tools/internal/pattern"
	"github.com/scatterkit/scatterkit/verbs"
)

// Structured Object workload kinds (Workload.StructObj).
const (
	// StructObjPut: PUT of an object of Small.Count bytes members of
	// Small.Size bytes each, in variants (multi-buffer, one buffer,
	// concatenated first, pool-backed buffers, and the fallback client).
	StructObjPut = "put"
	// StructObjGet: GET of the same object, whole and selective (one
	// member in 8), pooled and through the fallback client.
	StructObjGet = "get"
)

// structObjSelectEvery: a selective GET reads one member in this many.
const structObjSelectEvery = 8

// A structobj variant: one way of doing the workload's operation.
type structVariant struct {
	name string
	run  func(ctx context.Context) (structobj.Path, error)
	// bytes moved by one operation (the selective GET moves fewer).
	bytes uint64
	t     timings
	paths map[structobj.Path]int
}

// runStructObj runs a Structured Object workload: an owner and two
// clients (pooled, and without a pool: the fallback) in this process over
// the pass's transport; every repetition runs every variant once, in an
// order that rotates by one.
func (r *Runner) runStructObj(ctx context.Context, transport string, w *Workload) (res WorkloadResult, err error) {
	c := r.cfg
	res = WorkloadResult{Workload: *w}
	n, size := w.Small.Count, int(w.Small.Size)
	if n < structObjSelectEvery || size < 1 {
		return res, &FlagError{Flag: "-workloads", Value: w.Name, Reason: "a structobj workload needs at least 8 members"}
	}
	ownerT, clientT, err := c.newTransportPair(transport)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, clientT.Close(), ownerT.Close()) }()
	payload := n * size
	cal, fb, err := r.serviceCalibration(ctx, inprocPackWorkers())
	if err != nil {
		return res, err
	}
	res.Calibration = fb
	ownerAt, err := ownerAddr(ownerT)
	if err != nil {
		return res, err
	}
	own, err := structobj.NewOwner(structobj.OwnerConfig{Transport: ownerT, Addr: ownerAt,
		ArenaBytes: 8*payload + 16<<20, GatherStagingBytes: 16 << 20, PackWorkers: inprocPackWorkers(), Calibration: cal})
	if err != nil {
		return res, &OwnerError{Owner: OwnerInproc, Stage: "structobj owner", Err: err}
	}
	defer func() { err = errors.Join(err, own.Close()) }()
	// The clients' engines (what structobj would make: the zero config),
	// made here so their calibrations can be reported; closed after the
	// clients.
	type namedEngine struct {
		who string
		e   *verbs.Engine
	}
	var engines []namedEngine
	defer func() {
		for _, e := range engines {
			res.Calibration = append(res.Calibration, engineFallback(e.who, e.e)...)
			err = errors.Join(err, e.e.Close())
		}
	}()
	newClient := func(who string, cc structobj.ClientConfig) (*structobj.Client, error) {
		e, err := verbs.NewEngine(verbs.EngineConfig{})
		if err != nil {
			return nil, err
		}
		engines = append(engines, namedEngine{who, e})
		cc.Engine = e
		return structobj.NewClient(cc)
	}
	pooled, err := newClient("structobj pooled client engine", structobj.ClientConfig{Transport: clientT, PoolBytes: max(4*payload, 32<<20)})
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, pooled.Close()) }()
	plain, err := newClient("structobj client engine (no pool)", structobj.ClientConfig{Transport: clientT})
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, plain.Close()) }()
	addr := own.Addr()

	// The members' bytes: the pattern stream of the seed, one caller
	// buffer per member (and the same bytes in one buffer, and in
	// pool-backed buffers).
	rnd := planRand(c.Seed, w.Name)
	whole := make([]byte, payload)
	pattern.Fill(whole, c.Seed, rnd.Uint64N(1<<40))
	parts := make([][]byte, n)
	for i := range parts {
		parts[i] = bytes.Clone(whole[i*size : (i+1)*size])
	}
	var bufs []*structobj.Buffer
	defer func() {
		for _, b := range bufs {
			err = errors.Join(err, b.Release())
		}
	}()
	for i := range n {
		b, err := pooled.NewBuffer(size)
		if err != nil {
			return res, err
		}
		copy(b.Bytes(), parts[i])
		bufs = append(bufs, b)
	}
	multi := func(data [][]byte) (*structobj.Object, error) {
		var b structobj.Builder
		for i, d := range data {
			b.Bytes("m"+strconv.Itoa(i), d)
		}
		return b.Build()
	}
	objMulti, err := multi(parts)
	if err != nil {
		return res, err
	}
	bufData := make([][]byte, n)
	for i, b := range bufs {
		bufData[i] = b.Bytes()
	}
	objBufs, err := multi(bufData)
	if err != nil {
		return res, err
	}
	var sb structobj.Builder
	objSingle, err := sb.Bytes("all", whole).Build()
	if err != nil {
		return res, err
	}
	// lastPath is the path of the PUT the client ran since before.
	lastPath := func(cl *structobj.Client, before structobj.ClientStats) structobj.Path {
		a, b := cl.Stats().Puts, before.Puts
		switch {
		case a.Pool > b.Pool:
			return structobj.PathPool
		case a.Inline > b.Inline:
			return structobj.PathInline
		case a.Registered > b.Registered:
			return structobj.PathRegistered
		}
		return 0
	}
	put := func(cl *structobj.Client, key string, obj func() (*structobj.Object, error)) func(context.Context) (structobj.Path, error) {
		return func(ctx context.Context) (structobj.Path, error) {
			o, err := obj()
			if err != nil {
				return 0, err
			}
			before := cl.Stats()
			if _, err := cl.Put(ctx, addr, key, o); err != nil {
				return 0, err
			}
			return lastPath(cl, before), nil
		}
	}
	fixed := func(o *structobj.Object) func() (*structobj.Object, error) {
		return func() (*structobj.Object, error) { return o, nil }
	}
	var variants []*structVariant
	add := func(name string, b uint64, f func(context.Context) (structobj.Path, error)) {
		variants = append(variants, &structVariant{name: name, run: f, bytes: b, paths: map[structobj.Path]int{}})
	}
	// What a verified repetition checks after each variant ran.
	var verify func(ctx context.Context, v *structVariant) error
	switch w.StructObj {
	case StructObjPut:
		add("multi", uint64(payload), put(pooled, "multi", fixed(objMulti)))
		add("single", uint64(payload), put(pooled, "single", fixed(objSingle)))
		add("concat", uint64(payload), put(pooled, "concat", func() (*structobj.Object, error) {
			cat := make([]byte, 0, payload)
			for _, p := range parts {
				cat = append(cat, p...)
			}
			var b structobj.Builder
			return b.Bytes("all", cat).Build()
		}))
		add("buffers", uint64(payload), put(pooled, "buffers", fixed(objBufs)))
		add("fallback", uint64(payload), put(plain, "fallback", fixed(objMulti)))
		got := make([]byte, payload)
		verify = func(ctx context.Context, v *structVariant) error {
			clear(got)
			if _, _, err := plain.Get(ctx, addr, v.name, nil, [][]byte{got}); err != nil {
				return err
			}
			return compareBytes(got, whole, size)
		}
	case StructObjGet:
		if _, err := pooled.Put(ctx, addr, "object", objMulti); err != nil {
			return res, err
		}
		var sel []structobj.Select
		var want [][]byte
		for i := 0; i < n; i += structObjSelectEvery {
			sel = append(sel, structobj.Select{Member: "m" + strconv.Itoa(i)})
			want = append(want, parts[i])
		}
		selDst := make([][]byte, len(sel))
		for i := range selDst {
			selDst[i] = make([]byte, size)
		}
		wholeDst := [][]byte{make([]byte, payload)}
		bufDst, err := pooled.NewBuffer(payload)
		if err != nil {
			return res, err
		}
		defer func() { err = errors.Join(err, bufDst.Release()) }()
		get := func(cl *structobj.Client, s []structobj.Select, dst [][]byte) func(context.Context) (structobj.Path, error) {
			return func(ctx context.Context) (structobj.Path, error) {
				_, info, err := cl.Get(ctx, addr, "object", s, dst)
				return info.Path, err
			}
		}
		add("whole", uint64(payload), get(pooled, nil, wholeDst))
		add("whole-buffer", uint64(payload), get(pooled, nil, [][]byte{bufDst.Bytes()}))
		add("selective", uint64(len(sel)*size), get(pooled, sel, selDst))
		add("fallback", uint64(payload), get(plain, nil, wholeDst))
		add("selective-fallback", uint64(len(sel)*size), get(plain, sel, selDst))
		verify = func(ctx context.Context, v *structVariant) error {
			switch v.name {
			case "whole", "fallback":
				return compareBytes(wholeDst[0], whole, size)
			case "whole-buffer":
				return compareBytes(bufDst.Bytes(), whole, size)
			}
			for i := range selDst {
				if err := compareBytes(selDst[i], want[i], size); err != nil {
					return err
				}
			}
			return nil
		}
	default:
		return res, &FlagError{Flag: "-workloads", Value: w.Name, Reason: "unknown structobj workload kind"}
	}
	// failure (wrong bytes, the context ended, a connection gone) stops
	// the repetitions; the lines still show what was measured.
	var failure error
	reps := w.Reps(c)
	for rep := -c.Warmup; rep < reps && failure == nil; rep++ {
		if failure = ctx.Err(); failure != nil {
			break
		}
		check := rep == -c.Warmup || rep == reps-1
		for i := range variants {
			v := variants[(i+rep+c.Warmup)%len(variants)]
			var p structobj.Path
			err := v.t.run(rep >= 0, func() error {
				var err error
				p, err = v.run(ctx)
				return err
			})
			if err != nil {
				if fatal(ctx, err) {
					failure = err
					break
				}
				continue
			}
			v.paths[p]++
			if check {
				if err := verify(ctx, v); err != nil {
					failure = fmt.Errorf("scatterbench: %s/%s: %w", w.Name, v.name, err)
					break
				}
				res.Verified++
			}
		}
		if r.step != nil {
			r.step(w.Name)
		}
	}
	for _, v := range variants {
		p50 := v.t.p(0.5)
		chosen, most := "", 0
		for p, k := range v.paths {
			if k > most {
				chosen, most = p.String(), k
			}
		}
		res.Lines = append(res.Lines, Line{Workload: w.Name, Transport: transport, Owner: OwnerInproc, Seed: c.Seed,
			Mode: v.name, Chosen: chosen, Direction: map[string]string{StructObjPut: "write", StructObjGet: "read"}[w.StructObj],
			Fragments: uint64(n), PayloadBytes: v.bytes, Reps: len(v.t.d), P50Ms: ms(p50), P95Ms: ms(v.t.p(0.95)),
			GoodputGbps: gbps(v.bytes, p50), WindowGbps: gbps(v.bytes, p50), Errors: v.t.errors, opErr: v.t.first})
		res.OverBound = append(res.OverBound, 0)
		if v.t.first != nil && r.stderr != nil {
			fmt.Fprintf(r.stderr, "scatterbench: %s/%s over %s: %d failed operations, first: %v\n",
				w.Name, v.name, transport, v.t.errors, v.t.first)
		}
	}
	return res, failure
}

// compareBytes returns a *VerifyError at the first byte of got that
// differs from want (fragments of size bytes).
func compareBytes(got, want []byte, size int) error {
	if len(got) != len(want) {
		return fmt.Errorf("scatterbench: %d bytes, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return &VerifyError{Fragment: i / size, Offset: uint64(i), Want: want[i], Got: got[i]}
		}
	}
	return nil
}
