package bench

import (
	"context"
	"fmt"

	"github.com/scatterkit/scatterkit/verbs/engine"

	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/tools/internal/pattern"
	"github.com/scatterkit/scatterkit/verbs"
)

// source is where a fragment's expected bytes come from.
type source interface {
	// check returns the index of the first byte of b that differs from
	// the source bytes at off, or -1.
	check(b []byte, off uint64) int
	at(off uint64) byte
}

// streamSource is the pattern stream of a seed (the owner's table).
type streamSource struct{ seed uint64 }

func (s streamSource) check(b []byte, off uint64) int { return pattern.Check(b, s.seed, off) }
func (s streamSource) at(off uint64) byte             { return pattern.At(s.seed, off) }

// bytesSource is memory the requester holds (its WRITE source).
type bytesSource []byte

func (s bytesSource) check(b []byte, off uint64) int {
	want := s[off : off+uint64(len(b))]
	for i := range b {
		if b[i] != want[i] {
			return i
		}
	}
	return -1
}
func (s bytesSource) at(off uint64) byte { return s[off] }

// verifyDest checks a destination extent after a verified repetition:
// every fragment holds its source bytes, and every byte outside the
// fragments still holds the poison (the pattern of poisonSeed at
// poisonOff+offset) written before the repetition. The plan's destinations
// must come in increasing order (Workload.Plan builds them so).
func verifyDest(p *planfmt.Plan, dst []byte, src source, poisonSeed, poisonOff uint64) *VerifyError {
	var bad *VerifyError
	var prev uint64
	gap := func(lo, hi uint64) bool {
		if hi <= lo {
			return true
		}
		if i := pattern.Check(dst[lo:hi], poisonSeed, poisonOff+lo); i >= 0 {
			at := lo + uint64(i)
			bad = &VerifyError{Fragment: -1, Offset: at, Want: pattern.At(poisonSeed, poisonOff+at), Got: dst[at]}
			return false
		}
		return true
	}
	forEachFragment(p, func(k int, s, d, n uint64) bool {
		if d < prev {
			bad = &VerifyError{Fragment: k, Offset: d, Want: src.at(s), Got: dst[d]}
			return false
		}
		if !gap(prev, d) {
			return false
		}
		if i := src.check(dst[d:d+n], s); i >= 0 {
			bad = &VerifyError{Fragment: k, Offset: d + uint64(i), Want: src.at(s + uint64(i)), Got: dst[d+uint64(i)]}
			return false
		}
		prev = d + n
		return true
	})
	if bad == nil {
		gap(prev, p.DstExtent)
	}
	return bad
}

// copyPlan is one span of n bytes: how the verifier poisons and reads
// back a remote window with a direct operation.
func copyPlan(n uint64) *planfmt.Plan {
	return &planfmt.Plan{Form: planfmt.FormRanges, SrcExtent: n, DstExtent: n, Ranges: []planfmt.Range{{Len: n}}}
}

// directCopy moves n bytes between s.verify and the scratch window at
// remoteOff with one direct operation.
func (s *session) directCopy(ctx context.Context, dir verbs.Op, remoteOff, n uint64) error {
	res, err := s.eng.Do(ctx, &engine.ScatterOp{Conn: s.conn, Dir: dir, Remote: s.scratch, RemoteOff: remoteOff,
		Local: s.verify, Plan: copyPlan(n), Mode: engine.ModeDirect})
	if err != nil {
		return fmt.Errorf("scatterbench: verification %s of %d bytes: %w", dir, n, err)
	}
	if res.Bytes != n {
		return fmt.Errorf("scatterbench: verification %s moved %d bytes, want %d", dir, res.Bytes, n)
	}
	return nil
}

// poison fills every caller's destination extent with the poison pattern
// before a verified repetition: local memory for READ, the owner's scratch
// window (written direct) for WRITE.
func (s *session) poison(ctx context.Context, w *Workload, p *planfmt.Plan) error {
	seed := s.cfg.Seed + poisonSalt
	for c := range s.cfg.Callers {
		if w.Dir == verbs.OpRead {
			off := uint64(c) * s.dstStride
			pattern.Fill(s.dst.Bytes()[off:off+p.DstExtent], seed, off)
			if s.dev != nil {
				if err := s.dev.Upload(off, s.dst.Bytes()[off:off+p.DstExtent]); err != nil {
					return fmt.Errorf("scatterbench: poisoning the device destination: %w", err)
				}
			}
			continue
		}
		off := uint64(c) * s.writeStride
		pattern.Fill(s.verify.Bytes()[:p.DstExtent], seed, off)
		if err := s.directCopy(ctx, verbs.OpWrite, off, p.DstExtent); err != nil {
			return err
		}
	}
	return nil
}

// check verifies every caller's destination after a verified repetition.
func (s *session) check(ctx context.Context, w *Workload, p *planfmt.Plan, mode string) error {
	seed := s.cfg.Seed + poisonSalt
	for c := range s.cfg.Callers {
		var dst []byte
		var src source
		var off uint64
		if w.Dir == verbs.OpRead {
			off = uint64(c) * s.dstStride
			dst, src = s.dst.Bytes()[off:off+p.DstExtent], streamSource{s.cfg.Seed}
			if s.dev != nil { // the device's bytes, read back, are what is checked
				if err := s.dev.Download(off, dst); err != nil {
					return fmt.Errorf("scatterbench: reading the device destination back: %w", err)
				}
			}
		} else {
			off = uint64(c) * s.writeStride
			if err := s.directCopy(ctx, verbs.OpRead, off, p.DstExtent); err != nil {
				return err
			}
			dst, src = s.verify.Bytes()[:p.DstExtent], bytesSource(s.src.Bytes())
		}
		if s.cfg.corrupt != nil && c == 0 {
			s.cfg.corrupt(dst)
		}
		if bad := verifyDest(p, dst, src, seed, off); bad != nil {
			bad.Workload, bad.Mode, bad.Caller = w.Name, mode, c
			return bad
		}
	}
	return nil
}
