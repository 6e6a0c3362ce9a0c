package bench

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/verbs"
)

func TestWorkloadTable(t *testing.T) {
	seen := map[string]bool{}
	for _, w := range Named {
		t.Run(w.Name, func(t *testing.T) {
			require.False(t, seen[w.Name], "unique name")
			seen[w.Name] = true
			require.NotEmpty(t, w.Doc)
			require.NoError(t, w.Check(1<<30))
		})
	}
	for _, n := range DefaultWorkloads {
		_, ok := Lookup(n)
		require.True(t, ok, "default workload %q is in the table", n)
	}
	// The geometries.
	ms, _ := Lookup("many-small")
	require.Equal(t, Frags{264, 98_304}, ms.Small)
	require.True(t, ms.rows())
	mx, _ := Lookup("mixed")
	require.Equal(t, uint64(32_768*264+64*512<<10), mx.Payload())
	require.False(t, mx.rows())
}

func TestExpand(t *testing.T) {
	for _, tc := range []struct {
		list string
		want []string
	}{
		{"default", DefaultWorkloads},
		{"single-read, many-small,single-read", []string{"single-read", "many-small"}},
		{"engram-remote,engram-remote-t4", Groups["engram-remote"]},
		{"all", Names()},
		{"few-large,all", append([]string{"few-large"}, without(Names(), "few-large")...)},
	} {
		t.Run(tc.list, func(t *testing.T) {
			ws, err := Expand(tc.list)
			require.NoError(t, err)
			require.Equal(t, tc.want, workloadNames(ws))
		})
	}
	ws, err := Expand("matrix")
	require.NoError(t, err)
	require.Equal(t, len(Matrix()), len(ws))
	_, err = Expand("many-small,nope")
	require.ErrorIs(t, err, ErrUsage)
	require.ErrorContains(t, err, "nope")
}

func without(xs []string, x string) []string {
	var out []string
	for _, v := range xs {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

func TestMatrix(t *testing.T) {
	m := Matrix()
	sizes := map[uint64]bool{}
	dirs := map[verbs.Op]int{}
	names := map[string]bool{}
	for _, w := range m {
		if !isRFCCell(w.Small.Size, w.Small.Count) {
			require.LessOrEqual(t, w.Payload(), uint64(MatrixCap), w.Name)
		}
		require.True(t, strings.HasPrefix(w.Name, "matrix/"))
		require.False(t, names[w.Name], "unique %s", w.Name)
		names[w.Name] = true
		sizes[w.Small.Size] = true
		dirs[w.Dir]++
		require.NoError(t, w.Check(1<<30))
	}
	require.Len(t, sizes, len(MatrixSizes), "every fragment size appears")
	require.Equal(t, dirs[verbs.OpRead], dirs[verbs.OpWrite])
	require.True(t, names["matrix/264Bx98304/random-contiguous/read"])
	require.True(t, names["matrix/512KiBx64/sequential-fragmented/write"], "a size no listed count fits gets MatrixCap/size")
	require.True(t, names["matrix/264Bx131072/random-contiguous/read"], "the RFC's cell, past the cap")
	require.False(t, names["matrix/512Bx131072/random-contiguous/read"], "over the cap, not an RFC cell")
}

// TestPlans builds every geometry and checks the plan against the
// workload: it normalizes, carries the payload in the right fragment
// count, and its destinations increase (the verifier relies on it).
func TestPlans(t *testing.T) {
	r := newRand(t)
	const src = 64 << 20
	ws := append([]Workload(nil), Named...)
	for _, o := range []Order{Random, Sequential} {
		for _, l := range []Layout{Contiguous, Fragmented} {
			ws = append(ws,
				Workload{Name: "rows-" + string(o) + "-" + string(l), Dir: verbs.OpRead, Small: Frags{264, 3000}, Src: o, Dst: l},
				Workload{Name: "ranges-" + string(o) + "-" + string(l), Dir: verbs.OpWrite, Small: Frags{100, 500}, Large: Frags{70000, 5}, Src: o, Dst: l})
		}
	}
	for _, w := range ws {
		t.Run(w.Name, func(t *testing.T) {
			p, err := w.Plan(r, src)
			require.NoError(t, err)
			require.Equal(t, w.rows(), p.Form == planfmt.FormRows)
			require.Equal(t, w.DstExtent(), p.DstExtent)
			var n planfmt.Normalized
			require.NoError(t, planfmt.Normalize(&n, p))
			g := n.Summary()
			require.Equal(t, w.Payload(), g.Bytes)
			require.Equal(t, uint64(w.Fragments()), g.Fragments)
			var prev uint64
			count := 0
			forEachFragment(p, func(_ int, s, d, l uint64) bool {
				require.GreaterOrEqual(t, d, prev, "destinations increase")
				require.LessOrEqual(t, s+l, uint64(src))
				prev = d + l
				count++
				return true
			})
			require.Equal(t, w.Fragments(), count)
			if w.Src == Sequential && w.Dst == Contiguous {
				require.Equal(t, uint64(1), g.Spans, "sequential sources into a contiguous destination coalesce")
			}
			if w.Dst == Fragmented {
				require.Equal(t, g.Fragments, g.Runs, "every fragment is its own destination run")
			}
		})
	}
}

func TestPlanRejectsBadGeometry(t *testing.T) {
	for _, w := range []Workload{
		{Name: "none", Dir: verbs.OpRead, Src: Random, Dst: Contiguous},
		{Name: "dir", Small: Frags{8, 1}, Src: Random, Dst: Contiguous},
		{Name: "big row", Dir: verbs.OpRead, Small: Frags{2 << 20, 1}, Src: Random, Dst: Contiguous},
		{Name: "zero size", Dir: verbs.OpRead, Small: Frags{0, 4}, Src: Random, Dst: Contiguous},
		{Name: "order", Dir: verbs.OpRead, Small: Frags{8, 4}, Src: "zigzag", Dst: Contiguous},
		{Name: "sequential overflow", Dir: verbs.OpRead, Small: Frags{1 << 10, 2 << 10}, Src: Sequential, Dst: Contiguous},
	} {
		t.Run(w.Name, func(t *testing.T) {
			_, err := w.Plan(newRand(t), 1<<20)
			require.ErrorIs(t, err, ErrUsage)
		})
	}
}
