package costmodel

import (
	"bytes"
	"cmp"
	"strconv"
	"text/tabwriter"
	"time"
)

// AppendCandidates appends the candidates Decide compared, the direct one
// first, then the gather candidates in search order (widths ascending,
// chunk sizes ascending). It recomputes them from the decision's inputs.
func (d Decision) AppendCandidates(dst []Candidate) []Candidate {
	dst = append(dst, d.Direct)
	if d.Err != nil {
		return dst
	}
	m := d.model()
	search(&m, func(c, k int64, w int, _ float64) {
		t := m.gather(c, k, w)
		dst = append(dst, t.candidate(d.CMin))
	})
	return dst
}

// String renders the explanation (see AppendExplain).
func (d Decision) String() string { return string(d.AppendExplain(nil)) }

// AppendExplain appends a small table explaining the decision: the inputs,
// every candidate with its T_pack, T_bulk and total (the chosen one marked
// with '*'), and the margin test that settled it. It allocates; call it
// when a tool or a trace asks, not per operation.
func (d Decision) AppendExplain(dst []byte) []byte {
	p, g := &d.params, d.geom
	dst = append(dst, "geometry  S="...)
	dst = appendBytes(dst, g.S)
	dst = append(dst, " N="...)
	dst = strconv.AppendInt(dst, g.N, 10)
	dst = append(dst, " M="...)
	dst = strconv.AppendInt(dst, g.M, 10)
	dst = append(dst, "\nlink      B_net="...)
	dst = appendSI(dst, p.BNet, "B/s")
	dst = append(dst, " R_post="...)
	dst = appendSI(dst, p.RPost, "/s")
	dst = append(dst, " Q="...)
	dst = strconv.AppendInt(dst, int64(p.Q), 10)
	dst = append(dst, " L="...)
	dst = appendDuration(dst, p.L)
	dst = append(dst, "\npack      B_mem="...)
	dst = appendSI(dst, p.BMem, "B/s")
	dst = append(dst, " R_copy="...)
	dst = appendSI(dst, p.RCopy, "/s")
	dst = append(dst, " per worker\nfixed     T_plan="...)
	dst = appendDuration(dst, p.TPlan)
	dst = append(dst, '+')
	dst = appendDuration(dst, p.TPlanPerSpan)
	dst = append(dst, "/span T_control="...)
	dst = appendDuration(dst, p.TControl)
	dst = append(dst, " T_decode="...)
	dst = appendDuration(dst, p.TDecode)
	dst = append(dst, '+')
	dst = appendDuration(dst, p.TDecodePerSpan)
	dst = append(dst, "/span T_chunk_fixed="...)
	dst = appendDuration(dst, p.TChunkFixed)
	if p.TDirectPerRequest > 0 {
		dst = append(dst, " T_direct_req="...)
		dst = appendDuration(dst, p.TDirectPerRequest)
	}
	dst = append(dst, "\npolicy    epsilon="...)
	dst = strconv.AppendFloat(dst, p.Epsilon, 'g', -1, 64)
	dst = append(dst, " margin="...)
	dst = strconv.AppendFloat(dst, p.Margin, 'g', -1, 64)
	dst = append(dst, " staging="...)
	dst = appendBytes(dst, p.StagingBudget)
	dst = append(dst, " MaxP="...)
	dst = strconv.AppendInt(dst, int64(p.MaxP), 10)
	dst = append(dst, " C_min="...)
	dst = appendBytes(dst, d.CMin)
	dst = append(dst, '\n')
	if d.isStaged {
		// DecideStaged: C_min above is its lowest chunk, B_net*L/MaxCalls.
		dst = append(dst, "staged    a command per chunk; scatter B_mem="...)
		dst = appendSI(dst, d.staged.BMem, "B/s")
		dst = append(dst, " R_copy="...)
		dst = appendSI(dst, d.staged.RCopy, "/s")
		dst = append(dst, " into "...)
		dst = strconv.AppendInt(dst, d.staged.Runs, 10)
		dst = append(dst, " runs on "...)
		if d.staged.Workers > 0 {
			dst = strconv.AppendInt(dst, int64(d.staged.Workers), 10)
		} else {
			dst = append(dst, "one per call"...)
		}
		dst = append(dst, "; calls in flight <= "...)
		dst = strconv.AppendInt(dst, int64(cmp.Or(d.staged.MaxCalls, p.MaxP)), 10)
		dst = append(dst, '\n')
	}
	if d.Err != nil {
		dst = append(dst, "invalid   "...)
		dst = append(dst, d.Err.Error()...)
		return append(dst, "\nchoice    direct (fallback)\n"...)
	}

	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	var row []byte
	line := func(c Candidate) {
		row = row[:0]
		if c.Mode == d.Chosen.Mode && c.C == d.Chosen.C && c.P == d.Chosen.P {
			row = append(row, '*')
		}
		row = append(row, c.Mode.String()...)
		row = append(row, '\t')
		if c.Mode == ModeDirect {
			row = append(row, "-\t-\t"...)
			row = strconv.AppendInt(row, c.K, 10)
			row = append(row, "\t-\t-\t"...)
		} else {
			row = strconv.AppendInt(row, int64(c.P), 10)
			row = append(row, '\t')
			row = appendBytes(row, c.C)
			if c.Clamped {
				row = append(row, " (clamped)"...)
			}
			row = append(row, '\t')
			row = strconv.AppendInt(row, c.K, 10)
			row = append(row, '\t')
			row = appendDuration(row, c.Pack)
			row = append(row, '\t')
			row = appendDuration(row, c.Bulk)
			row = append(row, '\t')
		}
		row = appendDuration(row, c.Total)
		row = append(row, '\n')
		_, _ = tw.Write(row)
	}
	_, _ = tw.Write([]byte("mode\tP\tC\tK\tT_pack\tT_bulk\ttotal\n"))
	line(d.Direct)
	m := d.model()
	search(&m, func(c, k int64, w int, _ float64) {
		t := m.gather(c, k, w)
		line(t.candidate(d.CMin))
	})
	_ = tw.Flush()
	dst = append(dst, buf.Bytes()...)

	dst = append(dst, "choice    "...)
	dst = append(dst, d.Mode.String()...)
	if d.Mode == ModeGather {
		dst = append(dst, " P="...)
		dst = strconv.AppendInt(dst, int64(d.Chosen.P), 10)
		dst = append(dst, " C="...)
		dst = appendBytes(dst, d.Chosen.C)
	}
	dst = append(dst, ": "...)
	if d.Gather.C == 0 {
		dst = append(dst, "no gather candidate (empty operation or no staging)\n"...)
		return dst
	}
	dst = append(dst, "best gather "...)
	dst = appendDuration(dst, d.Gather.Total)
	dst = append(dst, " x (1+"...)
	dst = strconv.AppendFloat(dst, p.Margin, 'g', -1, 64)
	dst = append(dst, ") = "...)
	dst = appendDuration(dst, duration(d.Gather.Total.Seconds()*(1+p.Margin)))
	if d.Mode == ModeGather {
		dst = append(dst, " < "...)
	} else {
		dst = append(dst, " >= "...)
	}
	dst = append(dst, "direct "...)
	dst = appendDuration(dst, d.Direct.Total)
	return append(dst, '\n')
}

// appendDuration writes d like time.Duration.String, and Forever as
// "forever".
func appendDuration(dst []byte, d time.Duration) []byte {
	if d == Forever {
		return append(dst, "forever"...)
	}
	return append(dst, d.String()...)
}

// appendBytes writes n in binary units with up to three decimals:
// 264B, 64KiB, 1.5MiB.
func appendBytes(dst []byte, n int64) []byte {
	const units = "KMGTPE"
	if n < 1024 && n > -1024 {
		dst = strconv.AppendInt(dst, n, 10)
		return append(dst, 'B')
	}
	x := float64(n)
	i := -1
	for (x >= 1024 || x <= -1024) && i < len(units)-1 {
		x /= 1024
		i++
	}
	dst = appendTrimmed(dst, x)
	return append(dst, units[i], 'i', 'B')
}

// appendSI writes x with an SI prefix and up to three decimals:
// 3G, 150k, 12.5M.
func appendSI(dst []byte, x float64, unit string) []byte {
	const prefixes = "kMGTPE"
	i := -1
	for (x >= 1000 || x <= -1000) && i < len(prefixes)-1 {
		x /= 1000
		i++
	}
	dst = appendTrimmed(dst, x)
	if i >= 0 {
		dst = append(dst, prefixes[i])
	}
	return append(dst, unit...)
}

// appendTrimmed writes x with three decimals and drops trailing zeros.
func appendTrimmed(dst []byte, x float64) []byte {
	start := len(dst)
	dst = strconv.AppendFloat(dst, x, 'f', 3, 64)
	end := len(dst)
	for end > start && dst[end-1] == '0' {
		end--
	}
	if end > start && dst[end-1] == '.' {
		end--
	}
	return dst[:end]
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
