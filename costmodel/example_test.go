package costmodel_test

import (
	"context"
	"fmt"
	"time"

	"github.com/scatterkit/scatterkit/costmodel"
)

// A link whose per-fragment requests are round-trip bound, and one
// operation of 98,304 rows of 264 bytes.
func ExampleDecide() {
	p := costmodel.Params{
		BNet: 3e9, RPost: 150e3, Q: 16, L: 25 * time.Microsecond,
		BMem: 9e9, RCopy: 4e6,
		TPlan: 20 * time.Microsecond, TPlanPerSpan: 4 * time.Nanosecond,
		TDecode: 20 * time.Microsecond, TDecodePerSpan: 4 * time.Nanosecond,
		TControl: 50 * time.Microsecond, TChunkFixed: 5 * time.Microsecond,
		Epsilon: 0.05, Margin: 0.1, StagingBudget: 4 << 20, MaxP: 4, ChunkSteps: 3,
	}
	d := costmodel.Decide(p, costmodel.Geometry{S: 98_304 * 264, N: 98_304, M: 98_304})
	fmt.Println(d.Mode, d.Chosen.P, d.Chosen.C, d.Predicted())
	fmt.Print(d.String())
	// The chosen row, by hand: C = C_min = 3e9 B/s * 5us / 0.05 = 300000 B,
	// K = ceil(25952256 / 300000) = 87.
	// T_pack = 25952256/(4*9e9) + 98304/(4*4e6) = 0.720896 + 6.144 = 6.864896ms.
	// T_bulk = 25us + max(25952256/3e9 = 8.650752ms, 87/150e3, 6*25us) = 8.675752ms.
	// front  = (20us + 98304*4ns) + 50us + (20us + 98304*4ns) = 876.432us.
	// total  = 876.432us + 300000/9e9 (33.333us) + 8.675752ms + 300000/3e9 (100us)
	//        = 9.685517ms, against T_direct = 25us + 98304/150e3 = 655.385ms.

	// Output:
	// gather 4 300000 9.685517ms
	// geometry  S=24.75MiB N=98304 M=98304
	// link      B_net=3GB/s R_post=150k/s Q=16 L=25µs
	// pack      B_mem=9GB/s R_copy=4M/s per worker
	// fixed     T_plan=20µs+4ns/span T_control=50µs T_decode=20µs+4ns/span T_chunk_fixed=5µs
	// policy    epsilon=0.05 margin=0.1 staging=4MiB MaxP=4 C_min=292.969KiB
	// mode     P  C           K      T_pack       T_bulk      total
	// direct   -  -           98304  -            -           664.035752ms
	// gather   1  292.969KiB  87     27.459584ms  8.675752ms  28.469349ms
	// gather   1  1.144MiB    22     27.459584ms  8.675752ms  28.869349ms
	// gather   1  4MiB        7      27.459584ms  8.675752ms  30.200151ms
	// gather   2  292.969KiB  87     13.729792ms  8.675752ms  14.739557ms
	// gather   2  1.144MiB    22     13.729792ms  8.675752ms  15.139557ms
	// gather   2  2MiB        13     13.729792ms  8.675752ms  15.538292ms
	// *gather  4  292.969KiB  87     6.864896ms   8.675752ms  9.685517ms
	// gather   4  585.938KiB  44     6.864896ms   8.675752ms  9.818851ms
	// gather   4  1MiB        25     6.864896ms   8.675752ms  10.018218ms
	// choice    gather P=4 C=292.969KiB: best gather 9.685517ms x (1+0.1) = 10.654069ms < direct 664.035752ms
}

// A mixed operation: 64 large ranges stay direct, 32,768 small rows share
// one gather pipeline.
func ExampleSplit() {
	p := costmodel.Params{
		BNet: 3e9, RPost: 150e3, Q: 16, L: 25 * time.Microsecond,
		BMem: 9e9, RCopy: 4e6,
		TPlan: 20 * time.Microsecond, TPlanPerSpan: 4 * time.Nanosecond,
		TDecode: 20 * time.Microsecond, TDecodePerSpan: 4 * time.Nanosecond,
		TControl: 50 * time.Microsecond, TChunkFixed: 5 * time.Microsecond,
		Epsilon: 0.05, Margin: 0.1, StagingBudget: 64 << 20, MaxP: 4,
	}
	runs := []costmodel.Run{
		{Geometry: costmodel.Geometry{S: 32 << 20, N: 64, M: 64}, Gatherable: true},
		{Geometry: costmodel.Geometry{S: 32_768 * 264, N: 32_768, M: 32_768}, Gatherable: true},
	}
	modes := make([]costmodel.Mode, len(runs))
	s := costmodel.Split(p, runs, modes)
	fmt.Println(modes)
	fmt.Println(s)
	// Output:
	// [direct gather]
	// hybrid: predicted 14.520061ms, all-direct 232.973395ms, all-gather 14.579384ms; gather runs with S/N <= 511B (8.25MiB in 32768 fragments, P=1 C=292.969KiB); direct 32MiB in 64 fragments
}

// The engine feeds Moving with what it observes and refreshes its
// parameters from it between operations.
func ExampleMoving() {
	base := costmodel.Params{BMem: 8e9, RCopy: 4e6}
	m, err := costmodel.NewMoving(base, 0.5)
	if err != nil {
		fmt.Println(err)
		return
	}
	// 1 MiB in 4096 rows: predicted 1048576/8e9 + 4096/4e6 = 1.155072ms.
	_ = m.ObservePack(1<<20, 4096, 2310144*time.Nanosecond) // twice as slow
	_ = m.ObserveControl(80 * time.Microsecond)
	_ = m.ObserveRTT(30 * time.Microsecond)
	p := m.Refresh(base)
	fmt.Printf("B_mem %.0f B/s, R_copy %.0f/s, T_control %v, L %v\n", p.BMem, p.RCopy, p.TControl, p.L)
	// Output:
	// B_mem 4000000000 B/s, R_copy 2000000/s, T_control 80µs, L 30µs
}

// Calibrate runs once at startup; its figures go into Params.
func ExampleCalibrate() {
	c, err := costmodel.Calibrate(context.Background(), costmodel.CalibrateOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	p := c.Apply(costmodel.Params{ /* transport and policy fields */ })
	fmt.Printf("B_mem %.1f GB/s, R_copy %.1f M spans/s, measured in %v\n", p.BMem/1e9, p.RCopy/1e6, c.Elapsed)
}
