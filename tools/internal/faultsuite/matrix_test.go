package faultsuite_test

import (
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"testing"
	"time"
)

// workloads are the matrix's rows.
var workloads = []workload{
	{"verbs-direct-read", startVerbs(verbsDirectRead)},
	{"verbs-direct-write", startVerbs(verbsDirectWrite)},
	{"verbs-gather-read", startVerbs(verbsGatherRead)},
	{"verbs-gather-write", startVerbs(verbsGatherWrite)},
	{"engram-lookup", startEngram},
	{"structobj-put", startStructobj(false)},
	{"structobj-get", startStructobj(true)},
}

// cellSeed derives a cell's seed from the matrix seed and its name, so
// one cell reruns alone with the same inputs.
func cellSeed(seed uint64, name string) uint64 {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%d/%s", seed, name)
	return h.Sum64() | 1
}

// TestFaults runs every cell of the matrix (see the package doc) and logs
// a summary table.
func TestFaults(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano()) | 1
	}
	t.Logf("matrix seed %d (rerun with -faultsuite.seed=%d), %d trials per cell, deadline %v, bound %v",
		seed, seed, trials(), OpDeadline, OpDeadline+Grace)
	var mu sync.Mutex
	results := make(map[string]*cellResult)
	one := func(w workload, col column) {
		name := w.name + "/" + col.name
		res := &cellResult{workload: w.name, fault: col.name, reasons: make(map[string]int)}
		if t.Run(name, func(t *testing.T) { runCell(t, w, col, cellSeed(seed, name), res) }) || res.trials > 0 {
			mu.Lock()
			results[name] = res
			mu.Unlock()
		}
	}
	for _, w := range workloads {
		for _, col := range columns {
			if !col.together {
				one(w, col)
			}
		}
	}
	for _, col := range columns {
		if col.together {
			var wg sync.WaitGroup
			for _, w := range workloads {
				wg.Go(func() { one(w, col) })
			}
			wg.Wait()
		}
	}
	t.Log("summary (ok, f = failed whole, WRONG = success with wrong bytes, HANG = past the bound, STUCK = owner staging held while the stall lasts;" +
		" LEAK = staging leases not back, SICK = owner failed the direct health check, CLOSE = owner close failed):\n" +
		summary(results))
}

// summary renders the results as a table, workloads by faults.
func summary(results map[string]*cellResult) string {
	var b strings.Builder
	width := 20
	fmt.Fprintf(&b, "%-*s", width, "workload")
	for _, col := range columns {
		fmt.Fprintf(&b, " | %-14s", col.name)
	}
	b.WriteString("\n")
	for _, w := range workloads {
		fmt.Fprintf(&b, "%-*s", width, w.name)
		for _, col := range columns {
			s := "-"
			if r, ok := results[w.name+"/"+col.name]; ok {
				s = r.short()
			}
			fmt.Fprintf(&b, " | %-14s", s)
		}
		b.WriteString("\n")
	}
	return b.String()
}
