package bench

import (
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

func TestParseDefaults(t *testing.T) {
	c, err := Parse(nil, io.Discard)
	require.NoError(t, err)
	require.True(t, c.DefaultPasses)
	require.True(t, c.SeedFromClock)
	require.Equal(t, OwnerProcess, c.Owner)
	require.Equal(t, []string{"direct", "gather", "adaptive"}, modeNames(c.Modes))
	require.Equal(t, 20, c.Reps)
	require.Equal(t, 3, c.Warmup)
	require.Equal(t, int64(1<<30), c.TableBytes)
	require.Len(t, c.Passes, 2)
	require.Equal(t, "tcp", c.Passes[0].Transport)
	require.Equal(t, DefaultWorkloads, workloadNames(c.Passes[0].Workloads))
	require.Equal(t, "shm", c.Passes[1].Transport)
	require.Equal(t, []string{"many-small"}, workloadNames(c.Passes[1].Workloads))
}

func modeNames(ms []Mode) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

func workloadNames(ws []Workload) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Name)
	}
	return out
}

func TestParseFlags(t *testing.T) {
	c, err := Parse([]string{"-transport", "shm,tcp", "-owner", "inproc", "-mode", "adaptive,direct", "-workloads", "mixed,few-large,mixed",
		"-staging-slots", "4", "-staging-bytes", "32MiB", "-callers", "3", "-reps", "7", "-warmup", "0", "-seed", "99",
		"-table-bytes", "256MiB", "-lanes", "2", "-json", "-", "-quiet"}, io.Discard)
	require.NoError(t, err)
	require.False(t, c.DefaultPasses)
	require.False(t, c.SeedFromClock)
	require.Equal(t, uint64(99), c.Seed)
	require.Equal(t, []string{"adaptive", "direct"}, modeNames(c.Modes))
	require.Len(t, c.Passes, 2)
	require.Equal(t, "shm", c.Passes[0].Transport)
	require.Equal(t, []string{"mixed", "few-large"}, workloadNames(c.Passes[1].Workloads))
	require.Equal(t, 4, c.StagingSlots)
	require.Equal(t, int64(32<<20), c.StagingBytes)
	require.Equal(t, 3, c.Callers)
	require.Equal(t, 7, c.Reps)
	require.Zero(t, c.Warmup)
	require.Equal(t, int64(256<<20), c.TableBytes)
	require.Equal(t, 2, c.Lanes)
	require.Equal(t, "-", c.JSONPath)
	require.True(t, c.Quiet)
}

func TestParseCustomWorkload(t *testing.T) {
	c, err := Parse([]string{"-frags", "1000", "-frag-size", "128", "-dst", "fragmented", "-dir", "write", "-src", "sequential"}, io.Discard)
	require.NoError(t, err)
	require.False(t, c.DefaultPasses)
	require.Len(t, c.Passes, 1, "a custom geometry alone runs over tcp only")
	require.Equal(t, []Workload{{Name: "custom", Doc: "geometry from the flags", Dir: verbs.OpWrite, Small: Frags{128, 1000},
		Src: Sequential, Dst: Fragmented}}, c.Passes[0].Workloads)

	c, err = Parse([]string{"-workloads", "single-read", "-large-count", "2"}, io.Discard)
	require.NoError(t, err)
	ws := c.Passes[0].Workloads
	require.Equal(t, []string{"single-read", "custom"}, workloadNames(ws))
	require.Equal(t, Frags{512 << 10, 2}, ws[1].Large, "large fragments default to 512 KiB")
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		flag string
	}{
		{"transport", []string{"-transport", "udp"}, "-transport"},
		{"owner", []string{"-owner", "cloud"}, "-owner"},
		{"mode", []string{"-mode", "fastest"}, "-mode"},
		{"workload", []string{"-workloads", "many-large"}, "-workloads"},
		{"empty workloads", []string{"-workloads", ","}, "-workloads"},
		{"zero reps", []string{"-reps", "0"}, "-reps"},
		{"negative warmup", []string{"-warmup", "-1"}, "-warmup"},
		{"callers", []string{"-callers", "65"}, "-callers"},
		{"slots", []string{"-staging-slots", "0"}, "-staging-slots"},
		{"lanes", []string{"-lanes", "65"}, "-lanes"},
		{"small table", []string{"-table-bytes", "4KiB"}, "-table-bytes"},
		{"small staging", []string{"-staging-bytes", "4KiB"}, "-staging-bytes"},
		{"seed", []string{"-seed", "-3"}, "-seed"},
		{"tbf without netns", []string{"-tbf", "1gbit"}, "-tbf"},
		{"bad tbf", []string{"-owner", "netns", "-tbf", "1 gazillion"}, "-tbf"},
		{"shm in netns", []string{"-owner", "netns", "-transport", "shm"}, "-transport"},
		{"dir", []string{"-frags", "10", "-dir", "sideways"}, "-dir"},
		{"src", []string{"-frags", "10", "-src", "shuffled"}, "-src"},
		{"dst", []string{"-frags", "10", "-dst", "scattered"}, "-dst"},
		{"no fragments", []string{"-frag-size", "64"}, "-frags"},
		{"too large for the table", []string{"-large-count", "1", "-large-size", "2GiB"}, "-workloads"},
		{"sequential beyond the table", []string{"-frags", "5000000", "-frag-size", "4KiB", "-src", "sequential", "-table-bytes", "1GiB"}, "-workloads"},
		{"stray argument", []string{"run"}, "arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.args, io.Discard)
			require.ErrorIs(t, err, ErrUsage)
			var fe *FlagError
			require.True(t, errors.As(err, &fe), "%v", err)
			require.Equal(t, tc.flag, fe.Flag)
		})
	}
	_, err := Parse([]string{"-bogus"}, io.Discard)
	require.ErrorContains(t, err, "flag provided but not defined")
}
