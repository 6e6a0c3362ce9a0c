package bench

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestJSONSchema pins the JSON field names and their order: the lines are
// read by scripts and plots, so renaming a field must be deliberate
// (refresh with -update). Fields are only ever added: status on every
// line; error and calibration_fallback when set; the summary record.
func TestJSONSchema(t *testing.T) {
	gp, p50 := 12.5, 0.031
	lines := []any{
		Line{Workload: "many-small", Transport: "tcp", Owner: "process", Seed: 42, Mode: "adaptive", Chosen: "gather",
			Direction: "read", Fragments: 98304, PayloadBytes: 25952256, Reps: 20, P50Ms: 16.6, P95Ms: 18.1,
			GoodputGbps: 12.5, WindowGbps: 20.25, PlanMs: 0.3, ControlMs: 0.25, DecodeMs: 0.35, PackMs: 9.5,
			CompleteMs: 0.004, StagingPeakBytes: 4 << 20, StagingBoundBytes: 4 << 20, Status: StatusOK},
		CeilingLine{Workload: "ceiling/direct-control", For: "many-small", Transport: "tcp", Owner: "process", Seed: 42, Reps: 20, GoodputGbps: &gp},
		CeilingLine{Workload: "ceiling/rtt", For: "many-small", Transport: "tcp", Owner: "process", Seed: 42, Reps: 60, P50Ms: &p50},
		// A line of a failed workload, whose figures stood on a
		// calibration that fell back.
		Line{Workload: "reshard-mixed", Transport: "tcp", Owner: "inproc", Seed: 42, Mode: "gather", Direction: "read",
			Fragments: 65560, PayloadBytes: 64 << 20, Errors: 3, Status: StatusFailed,
			Error:               "3 failed operations; first: verbs: connection closed",
			CalibrationFallback: "in-process gather services (2 pack workers): costmodel: calibration interrupted: context deadline exceeded"},
		SummaryLine{Workload: "summary", Seed: 42, Status: StatusFailed, ExitStatus: 1, GoalsOK: 20, GoalsMissed: 2, GoalsNotMeasured: 4,
			FailedOperations: 3, FailedWorkloads: []WorkloadFailure{{Transport: "tcp", Workload: "reshard-mixed", Status: StatusFailed,
				Error: "gather: 3 failed operations; first: verbs: connection closed"}},
			CalibrationFallbacks: []string{"tcp in-process gather services (2 pack workers): costmodel: calibration interrupted: context deadline exceeded [reshard-kv, reshard-mixed]"},
			Text:                 "20 goals ok, 2 missed, 4 not measured"},
	}
	var b strings.Builder
	for _, l := range lines {
		enc, err := json.Marshal(l)
		require.NoError(t, err)
		b.Write(enc)
		b.WriteByte('\n')
	}
	path := filepath.Join("testdata", "lines.golden")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), b.String(), "JSON lines changed (refresh with -update if intended)")

	// The field list of the issue, exactly.
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.SplitN(b.String(), "\n", 2)[0]), &m))
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	require.ElementsMatch(t, append(strings.Fields(`workload transport mode chosen direction fragments payload_bytes reps
		p50_ms p95_ms goodput_gbps window_gbps plan_ms control_ms decode_ms pack_ms complete_ms staging_peak_bytes
		staging_bound_bytes leaked_leases fallbacks errors`), "owner", "seed", "status"), keys)
}
