package owner

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs/discovery"
)

func TestConfigRejects(t *testing.T) {
	dir := discovery.NewMemory()
	t.Cleanup(func() { require.NoError(t, dir.Close()) })
	ok := Config{Transport: TransportTCP, Size: 1 << 20}
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"unknown transport", func(c *Config) { c.Transport = "rdma" }, "Transport"},
		{"no source", func(c *Config) { c.Size = 0 }, "File/Size"},
		{"two sources", func(c *Config) { c.File = "/etc/hostname" }, "File/Size"},
		{"negative size", func(c *Config) { c.Size = -1 }, "Size"},
		{"huge size", func(c *Config) { c.Size = MaxDataBytes + 1 }, "Size"},
		{"writable file over shm", func(c *Config) { c.Size, c.File, c.Writable, c.Transport = 0, "/etc/hostname", true, TransportSHM }, "Writable"},
		{"negative scratch", func(c *Config) { c.Scratch = -5 }, "Scratch"},
		{"negative slots", func(c *Config) { c.StagingSlots = -1 }, "Staging*/PackWorkers/ParallelMin"},
		{"tiny staging", func(c *Config) { c.StagingBytes = 4096 }, "StagingBytes"},
		{"too many slots", func(c *Config) { c.StagingSlots = 1 << 17 }, "StagingSlots"},
		{"too many workers", func(c *Config) { c.PackWorkers = 5000 }, "PackWorkers"},
		{"directory without name", func(c *Config) { c.Directory = dir }, "Name"},
		{"name without directory", func(c *Config) { c.Name = "a/b" }, "Directory"},
		{"bad name", func(c *Config) { c.Directory, c.Name = dir, "/leading-slash" }, "Name"},
		{"export named scratch", func(c *Config) { c.Export, c.Scratch = DefaultScratchName, 4096 }, "Export"},
		{"reserved attribute", func(c *Config) { c.Directory, c.Name, c.Attrs = dir, "a/b", map[string]string{"bytes": "1"} }, "Attrs"},
		{"bad attribute key", func(c *Config) { c.Directory, c.Name, c.Attrs = dir, "a/b", map[string]string{"a b": "1"} }, "Attrs"},
		{"attribute without directory", func(c *Config) { c.Attrs = map[string]string{"shard": "1"} }, "Attrs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			o, err := Start(testContext(t), c)
			require.Nil(t, o)
			require.ErrorIs(t, err, ErrConfig)
			var ce *ConfigError
			require.True(t, errors.As(err, &ce))
			require.Equal(t, tc.field, ce.Field)
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	c, err := Config{Transport: TransportSHM, Size: 4096}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, DefaultExport, c.Export)
	require.Equal(t, int64(DefaultStagingBytes), c.StagingBytes)
	require.Equal(t, DefaultStagingSlots, c.StagingSlots)
	require.Positive(t, c.PackWorkers)
	require.Equal(t, DefaultParallelMin, c.ParallelMin)
}
