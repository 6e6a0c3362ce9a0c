package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/scatterkit/scatterkit/structobj"
	"github.com/scatterkit/scatterkit/tools/internal/pattern"
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
	// verify checks what the variant moved, after it ran in a verified
	// repetition.
	verify func(ctx context.Context) error
	// bytes moved by one operation (the selective GET moves fewer).
	bytes uint64
	t     timings
	paths map[structobj.Path]int
}

func newStructVariant(name string, bytes uint64, run func(context.Context) (structobj.Path, error)) *structVariant {
	return &structVariant{name: name, run: run, bytes: bytes, paths: map[structobj.Path]int{}}
}

// runStructObj runs a Structured Object workload: an owner and two
// clients (pooled, and without a pool: the fallback) in this process over
// the pass's transport; every repetition runs every variant once, in an
// order that rotates by one.
func (r *Runner) runStructObj(ctx context.Context, transport string, w *Workload) (res WorkloadResult, err error) {
	res = WorkloadResult{Workload: *w}
	n, size := w.Small.Count, int(w.Small.Size)
	if n < structObjSelectEvery || size < 1 {
		return res, &FlagError{Flag: "-workloads", Value: w.Name, Reason: "a structobj workload needs at least 8 members"}
	}
	var done closers
	defer done.closeInto(&err)
	rig, err := r.newStructObjRig(ctx, transport, n*size, &res, &done)
	if err != nil {
		return res, err
	}
	d, err := newStructObjData(rig.pooled, r.cfg.Seed, w, &done)
	if err != nil {
		return res, err
	}
	var variants []*structVariant
	switch w.StructObj {
	case StructObjPut:
		variants = rig.putVariants(d)
	case StructObjGet:
		if variants, err = rig.getVariants(ctx, d, &done); err != nil {
			return res, err
		}
	default:
		return res, &FlagError{Flag: "-workloads", Value: w.Name, Reason: "unknown structobj workload kind"}
	}
	failure := r.repeat(ctx, w, len(variants), func(i int, measured, verify bool) error {
		return variants[i].once(ctx, w, measured, verify, &res)
	})
	r.structObjLines(&res, transport, w, variants)
	return res, failure
}

// structObjRig is what a structobj workload runs on: an owner in this
// process at addr and two clients of it, pooled and plain (no pool: the
// fallback). The clients' engines (what structobj would make: the zero
// config) are made here so that their calibrations can be reported.
type structObjRig struct {
	addr          string
	pooled, plain *structobj.Client
	engines       []structObjEngine
}

type structObjEngine struct {
	who string
	e   *engine.Engine
}

// newStructObjRig sets up the rig of a structobj workload of payload
// bytes over transport: a transport pair, the owner (calibrated as the
// in-process gather services are: res.Calibration reports the fallback),
// the clients and their engines. What it made goes onto done, to be
// closed in reverse order (the clients, then their engines, whose
// calibration fallbacks then join res.Calibration, the owner, the
// transports), also when it fails halfway.
func (r *Runner) newStructObjRig(ctx context.Context, transport string, payload int, res *WorkloadResult, done *closers) (*structObjRig, error) {
	c := r.cfg
	ownerT, clientT, err := c.newTransportPair(transport)
	if err != nil {
		return nil, err
	}
	done.push(func() error { return errors.Join(clientT.Close(), ownerT.Close()) })
	cal, fb, err := r.serviceCalibration(ctx, inprocPackWorkers())
	if err != nil {
		return nil, err
	}
	res.Calibration = fb
	ownerAt, err := ownerAddr(ownerT)
	if err != nil {
		return nil, err
	}
	own, err := structobj.NewOwner(structobj.OwnerConfig{Transport: ownerT, Addr: ownerAt,
		ArenaBytes: 8*payload + 16<<20, GatherStagingBytes: 16 << 20, PackWorkers: inprocPackWorkers(), Calibration: cal})
	if err != nil {
		return nil, &OwnerError{Owner: OwnerInproc, Stage: "structobj owner", Err: err}
	}
	done.push(own.Close)
	rig := &structObjRig{}
	done.push(func() error {
		var err error
		for _, e := range rig.engines {
			res.Calibration = append(res.Calibration, engineFallback(e.who, e.e)...)
			err = errors.Join(err, e.e.Close())
		}
		return err
	})
	if rig.pooled, err = rig.newClient("structobj pooled client engine", structobj.ClientConfig{Transport: clientT, PoolBytes: max(4*payload, 32<<20)}); err != nil {
		return nil, err
	}
	done.push(rig.pooled.Close)
	if rig.plain, err = rig.newClient("structobj client engine (no pool)", structobj.ClientConfig{Transport: clientT}); err != nil {
		return nil, err
	}
	done.push(rig.plain.Close)
	rig.addr = own.Addr()
	return rig, nil
}

// newClient makes a client of cc on an engine of its own, named who in
// the calibration report.
func (rig *structObjRig) newClient(who string, cc structobj.ClientConfig) (*structobj.Client, error) {
	e, err := engine.New(engine.Config{})
	if err != nil {
		return nil, err
	}
	rig.engines = append(rig.engines, structObjEngine{who, e})
	cc.Engine = e
	return structobj.NewClient(cc)
}

// structObjData is a structobj workload's members: the pattern stream
// of the seed (whole), one caller buffer per member (parts), the same
// bytes in pool-backed buffers, and the objects built over them.
type structObjData struct {
	n, size int
	whole   []byte
	parts   [][]byte
	// objMulti has a member per part, objBufs one per pool-backed
	// buffer, objSingle one member "all" of whole.
	objMulti, objBufs, objSingle *structobj.Object
}

// newStructObjData fills w's members and builds its objects; the
// pool-backed buffers of pooled go onto done, to be released.
func newStructObjData(pooled *structobj.Client, seed uint64, w *Workload, done *closers) (*structObjData, error) {
	n, size := w.Small.Count, int(w.Small.Size)
	payload := n * size
	d := &structObjData{n: n, size: size}
	rnd := planRand(seed, w.Name)
	d.whole = make([]byte, payload)
	pattern.Fill(d.whole, seed, rnd.Uint64N(1<<40))
	d.parts = make([][]byte, n)
	for i := range d.parts {
		d.parts[i] = bytes.Clone(d.whole[i*size : (i+1)*size])
	}
	var bufs []*structobj.Buffer
	done.push(func() error {
		var err error
		for _, b := range bufs {
			err = errors.Join(err, b.Release())
		}
		return err
	})
	for i := range n {
		b, err := pooled.NewBuffer(size)
		if err != nil {
			return nil, err
		}
		copy(b.Bytes(), d.parts[i])
		bufs = append(bufs, b)
	}
	var err error
	if d.objMulti, err = multiMember(d.parts); err != nil {
		return nil, err
	}
	bufData := make([][]byte, n)
	for i, b := range bufs {
		bufData[i] = b.Bytes()
	}
	if d.objBufs, err = multiMember(bufData); err != nil {
		return nil, err
	}
	var sb structobj.Builder
	if d.objSingle, err = sb.Bytes("all", d.whole).Build(); err != nil {
		return nil, err
	}
	return d, nil
}

// multiMember builds an object of one member per buffer, "m0", "m1", ...
func multiMember(data [][]byte) (*structobj.Object, error) {
	var b structobj.Builder
	for i, d := range data {
		b.Bytes("m"+strconv.Itoa(i), d)
	}
	return b.Build()
}

// putVariants are the variants of a PUT workload, each verified by
// reading its object back whole through the plain client.
func (rig *structObjRig) putVariants(d *structObjData) []*structVariant {
	payload := uint64(d.n * d.size)
	fixed := func(o *structobj.Object) func() (*structobj.Object, error) {
		return func() (*structobj.Object, error) { return o, nil }
	}
	variants := []*structVariant{
		newStructVariant("multi", payload, rig.put(rig.pooled, "multi", fixed(d.objMulti))),
		newStructVariant("single", payload, rig.put(rig.pooled, "single", fixed(d.objSingle))),
		newStructVariant("concat", payload, rig.put(rig.pooled, "concat", func() (*structobj.Object, error) {
			cat := make([]byte, 0, payload)
			for _, p := range d.parts {
				cat = append(cat, p...)
			}
			var b structobj.Builder
			return b.Bytes("all", cat).Build()
		})),
		newStructVariant("buffers", payload, rig.put(rig.pooled, "buffers", fixed(d.objBufs))),
		newStructVariant("fallback", payload, rig.put(rig.plain, "fallback", fixed(d.objMulti))),
	}
	got := make([]byte, payload)
	for _, v := range variants {
		v.verify = func(ctx context.Context) error {
			clear(got)
			if _, _, err := rig.plain.Get(ctx, rig.addr, v.name, nil, [][]byte{got}); err != nil {
				return err
			}
			return compareBytes(got, d.whole, d.size)
		}
	}
	return variants
}

// put returns a variant's operation: a PUT through cl of the object obj
// returns under key, and the path it took.
func (rig *structObjRig) put(cl *structobj.Client, key string, obj func() (*structobj.Object, error)) func(context.Context) (structobj.Path, error) {
	return func(ctx context.Context) (structobj.Path, error) {
		o, err := obj()
		if err != nil {
			return 0, err
		}
		before := cl.Stats()
		if _, err := cl.Put(ctx, rig.addr, key, o); err != nil {
			return 0, err
		}
		return putPath(cl, before), nil
	}
}

// putPath is the path of the PUT that cl ran since before.
func putPath(cl *structobj.Client, before structobj.ClientStats) structobj.Path {
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

// getVariants PUTs the object the GET workload reads and returns its
// variants: whole and selective (one member in structObjSelectEvery),
// pooled and plain; the pool-backed destination goes onto done.
func (rig *structObjRig) getVariants(ctx context.Context, d *structObjData, done *closers) ([]*structVariant, error) {
	n, size, payload := d.n, d.size, d.n*d.size
	if _, err := rig.pooled.Put(ctx, rig.addr, "object", d.objMulti); err != nil {
		return nil, err
	}
	var sel []structobj.Select
	var want [][]byte
	for i := 0; i < n; i += structObjSelectEvery {
		sel = append(sel, structobj.Select{Member: "m" + strconv.Itoa(i)})
		want = append(want, d.parts[i])
	}
	selDst := make([][]byte, len(sel))
	for i := range selDst {
		selDst[i] = make([]byte, size)
	}
	wholeDst := [][]byte{make([]byte, payload)}
	bufDst, err := rig.pooled.NewBuffer(payload)
	if err != nil {
		return nil, err
	}
	done.push(bufDst.Release)
	get := func(cl *structobj.Client, s []structobj.Select, dst [][]byte) func(context.Context) (structobj.Path, error) {
		return func(ctx context.Context) (structobj.Path, error) {
			_, info, err := cl.Get(ctx, rig.addr, "object", s, dst)
			return info.Path, err
		}
	}
	checkWhole := func(got []byte) func(context.Context) error {
		return func(context.Context) error { return compareBytes(got, d.whole, size) }
	}
	checkSelected := func(context.Context) error {
		for i := range selDst {
			if err := compareBytes(selDst[i], want[i], size); err != nil {
				return err
			}
		}
		return nil
	}
	variants := []*structVariant{
		newStructVariant("whole", uint64(payload), get(rig.pooled, nil, wholeDst)),
		newStructVariant("whole-buffer", uint64(payload), get(rig.pooled, nil, [][]byte{bufDst.Bytes()})),
		newStructVariant("selective", uint64(len(sel)*size), get(rig.pooled, sel, selDst)),
		newStructVariant("fallback", uint64(payload), get(rig.plain, nil, wholeDst)),
		newStructVariant("selective-fallback", uint64(len(sel)*size), get(rig.plain, sel, selDst)),
	}
	for _, v := range variants {
		switch v.name {
		case "whole", "fallback":
			v.verify = checkWhole(wholeDst[0])
		case "whole-buffer":
			v.verify = checkWhole(bufDst.Bytes())
		default:
			v.verify = checkSelected
		}
	}
	return variants, nil
}

// once runs the variant once (measured or a warm-up) and, when verify is
// set, checks what it moved. A failed operation is counted and the
// repetitions go on; it returns an error (which stops them) only for wrong
// bytes or a failure that ends the pass.
func (v *structVariant) once(ctx context.Context, w *Workload, measured, verify bool, res *WorkloadResult) error {
	var p structobj.Path
	err := v.t.run(measured, func() error {
		var err error
		p, err = v.run(ctx)
		return err
	})
	if err != nil {
		if fatal(ctx, err) {
			return err
		}
		return nil
	}
	v.paths[p]++
	if verify {
		if err := v.verify(ctx); err != nil {
			return fmt.Errorf("scatterbench: %s/%s: %w", w.Name, v.name, err)
		}
		res.Verified++
	}
	return nil
}

// structObjLines appends a line per variant to res, its mode the
// variant's name and its chosen path the one most of its operations took.
func (r *Runner) structObjLines(res *WorkloadResult, transport string, w *Workload, variants []*structVariant) {
	for _, v := range variants {
		p50 := v.t.p(0.5)
		chosen, most := "", 0
		for p, k := range v.paths {
			if k > most {
				chosen, most = p.String(), k
			}
		}
		res.Lines = append(res.Lines, Line{Workload: w.Name, Transport: transport, Owner: OwnerInproc, Seed: r.cfg.Seed,
			Mode: v.name, Chosen: chosen, Direction: map[string]string{StructObjPut: "write", StructObjGet: "read"}[w.StructObj],
			Fragments: uint64(w.Small.Count), PayloadBytes: v.bytes, Reps: len(v.t.d), P50Ms: ms(p50), P95Ms: ms(v.t.p(0.95)),
			GoodputGbps: gbps(v.bytes, p50), WindowGbps: gbps(v.bytes, p50), Errors: v.t.errors, opErr: v.t.first})
		res.OverBound = append(res.OverBound, 0)
		if v.t.first != nil && r.stderr != nil {
			fmt.Fprintf(r.stderr, "scatterbench: %s/%s over %s: %d failed operations, first: %v\n",
				w.Name, v.name, transport, v.t.errors, v.t.first)
		}
	}
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
