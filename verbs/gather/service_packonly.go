package gather

import (
	"context"
	"fmt"
	"time"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/gatherwire"
	"github.com/scatterkit/scatterkit/verbs/internal/packstream"

	"github.com/scatterkit/scatterkit/planfmt"
)

// PackOnlyResult is what [Service.PackOnly] measured.
type PackOnlyResult struct {
	// Elapsed is the time spent packing the whole payload.
	Elapsed time.Duration
	// Bytes is the payload packed; Chunks how many chunks it took.
	Bytes  uint64
	Chunks int
	// Workers is the most goroutines one chunk was packed with.
	Workers int
}

// PackOnly is the packing ceiling of a gather READ: it packs the whole
// payload of plan p, whose source extent starts at srcOff in the export
// named by key, chunk after chunk into one staging lease of chunk bytes,
// with the same cursors, pack loops and workers as a command, and
// transfers nothing. Benchmarks compare a gather's end-to-end time with it.
//
// p is validated as a command's plan is (its source extent inside the
// export, planfmt.Normalize); chunk must lie within the service's chunk
// bounds and hold a row. norm is storage for the normalization, reused
// across calls (nil allocates). PackOnly waits for the lease like a
// command's first slot (Config.AcquireTimeout).
func (s *Service) PackOnly(ctx context.Context, key verbs.Key, srcOff uint64, p *planfmt.Plan, chunk int, norm *planfmt.Normalized) (PackOnlyResult, error) {
	bad := func(field, reason string) error {
		return &gatherwire.InvalidOpError{Field: "PackOnly." + field, Reason: reason}
	}
	if p == nil {
		return PackOnlyResult{}, bad("Plan", "nil")
	}
	r, ok := s.exports[key]
	if !ok {
		return PackOnlyResult{}, bad("Key", fmt.Sprintf("%v is not an export of this service", key))
	}
	if !r.Access().Has(verbs.AccessRemoteRead) {
		return PackOnlyResult{}, bad("Key", "export does not permit remote reads")
	}
	if !inBounds(srcOff, p.SrcExtent, uint64(r.Len())) {
		return PackOnlyResult{}, bad("Plan.SrcExtent", fmt.Sprintf("%d bytes at %d outside the export's %d", p.SrcExtent, srcOff, r.Len()))
	}
	if norm == nil {
		norm = new(planfmt.Normalized)
	}
	if err := planfmt.Normalize(norm, p); err != nil {
		return PackOnlyResult{}, fmt.Errorf("verbs: pack-only plan: %w", err)
	}
	rowSize := 1
	if p.Form == planfmt.FormRows {
		rowSize = int(p.Rows.RowSize)
	}
	if int64(chunk) < s.info.MinChunk || int64(chunk) > s.info.MaxChunk || chunk < rowSize {
		return PackOnlyResult{}, bad("chunk", fmt.Sprintf("%d bytes outside [%d, %d] or below the row size %d",
			chunk, s.info.MinChunk, s.info.MaxChunk, rowSize))
	}
	lease, err := s.cfg.Staging.Pool().AcquireTimeout(chunk, s.cfg.AcquireTimeout)
	if err != nil {
		return PackOnlyResult{}, &gatherwire.GatherError{Code: gatherwire.GatherExhausted, Stage: "staging", Err: err}
	}
	defer func() { _ = lease.Release() }()
	buf := lease.Bytes()[:chunk]
	src := r.Bytes()[srcOff : srcOff+p.SrcExtent]

	res := PackOnlyResult{Workers: 1, Bytes: norm.Summary().Bytes}
	var rows packstream.RowCursor
	var rng packstream.RangeCursor
	if p.Form == planfmt.FormRows {
		rows.Init(p, src, norm.Summary().Skipped > 0)
		rows.Workers, rows.ParallelMin = s.workers, s.cfg.ParallelMin
	} else {
		rng.Workers, rng.ParallelMin = s.workers, s.cfg.ParallelMin
		rng.Init(p.Ranges)
	}
	if s.workers != nil && chunk >= s.cfg.ParallelMin {
		res.Workers = s.workers.Len()
	}
	t := time.Now()
	for packed := uint64(0); packed < res.Bytes; res.Chunks++ {
		if err := ctx.Err(); err != nil {
			return PackOnlyResult{}, err
		}
		if p.Form == planfmt.FormRows {
			packed += uint64(rows.PackInto(buf))
		} else {
			packed += uint64(rng.PackInto(buf, src))
		}
	}
	res.Elapsed = time.Since(t)
	return res, nil
}
