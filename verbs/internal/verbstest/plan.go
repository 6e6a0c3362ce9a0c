package verbstest

import "github.com/scatterkit/scatterkit/planfmt"

// Fragment is one source->destination copy of a plan, computed
// independently of planfmt.
type Fragment struct{ Src, Dst, N uint64 }

// Fragments lists the carrying fragments of p.
func Fragments(p *planfmt.Plan) []Fragment {
	var out []Fragment
	if p.Form == planfmt.FormRanges {
		for _, r := range p.Ranges {
			if r.Len > 0 {
				out = append(out, Fragment{r.Src, r.Dst, r.Len})
			}
		}
		return out
	}
	rw := &p.Rows
	for i := range rw.Len() {
		id := rw.ID(i)
		if id < 0 {
			continue
		}
		dst := rw.DstBase + uint64(i)*rw.RowSize
		if rw.Layout.Kind == planfmt.LayoutStrided {
			t, k := uint64(i)/rw.Layout.Cols, uint64(i)%rw.Layout.Cols
			dst = rw.DstBase + t*rw.Layout.RowStride + k*rw.Layout.ColStride
		}
		out = append(out, Fragment{rw.SrcBase + uint64(id)*rw.RowSize, dst, rw.RowSize})
	}
	return out
}

// Expect applies p to copies: src (the source extent's region from
// srcOff) into dst (the destination region from dstOff).
func Expect(p *planfmt.Plan, src []byte, srcOff uint64, dst []byte, dstOff uint64) []byte {
	want := append([]byte(nil), dst...)
	for _, fr := range Fragments(p) {
		copy(want[dstOff+fr.Dst:dstOff+fr.Dst+fr.N], src[srcOff+fr.Src:srcOff+fr.Src+fr.N])
	}
	return want
}
