package owner

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"runtime"
	"time"

	"github.com/scatterkit/scatterkit/verbs/discovery"
	"github.com/scatterkit/scatterkit/verbs/transports"
)

// Transport names, as published in discovery records (and known to
// verbs/transports).
const (
	TransportTCP = "tcp"
	TransportSHM = "shm"
)

// Defaults for Config fields left zero.
const (
	DefaultExport       = "table"
	DefaultScratchName  = "scratch"
	DefaultStagingBytes = 64 << 20
	DefaultStagingSlots = 8
	DefaultParallelMin  = 512 << 10
	// MaxDataBytes bounds a generated data region (1 TiB).
	MaxDataBytes = 1 << 40
)

// Config describes an owner: where its data comes from, how it is served
// and where it is published. Exactly one of File and Size is set.
type Config struct {
	// Transport is TransportTCP or TransportSHM.
	Transport string
	// Listen is the address to serve at: "host:port" for tcp (default
	// "127.0.0.1:0"), a Unix socket path or "@abstract" name for shm
	// (default "@scatterd-<pid>-<n>").
	Listen string

	// File is a file whose contents are the data region, mapped shared
	// (read-only unless Writable). Over shm the file is copied into a
	// sealed memfd at start, so Writable is refused there.
	File string
	// Size and Seed make a generated data region instead: Size bytes of
	// the pattern stream of Seed (package pattern).
	Size int64
	Seed uint64
	// Writable lets requesters WRITE the data region (and, for a file,
	// changes the file).
	Writable bool
	// Export is the data region's export name (default "table").
	Export string
	// Scratch, when positive, adds a read-write export "scratch" of that
	// many bytes, filled with the pattern stream of ScratchSeed
	// (benchmarks WRITE into it so the data region stays immutable).
	Scratch     int64
	ScratchSeed uint64
	// NoHugePages skips the transparent huge page advice on generated
	// tcp data (it is anonymous memory there; shm data is a memfd).
	NoHugePages bool

	// StagingBytes is the gather service's staging pool (default 64 MiB);
	// StagingSlots bounds one command's slots (verbs ServiceConfig.MaxSlots,
	// default 8); PackWorkers the goroutines packing one chunk (default
	// min(GOMAXPROCS, 8)); ParallelMin the smallest chunk split among them
	// (default 512 KiB).
	StagingBytes int64
	StagingSlots int
	PackWorkers  int
	ParallelMin  int

	// ProgressTimeout is how long a gather command may make no progress
	// before its requester's connection is evicted (verbs
	// ServiceConfig.ProgressTimeout; 0: its default, 2 s).
	ProgressTimeout time.Duration

	// TCPNoChecksums lets tcp requesters that ask for it exchange frames
	// without checksums (verbs/tcp Config.NoChecksums).
	TCPNoChecksums bool

	// AllowUIDs and ReadUIDs are the users an shm owner serves: AllowUIDs
	// may read and write its exports (as their access allows), ReadUIDs
	// only read them (they are not given a writable export at all). Both
	// empty: only the owner's own user (verbs.OwnUIDPolicy). tcp has no
	// peer credentials; setting either there is refused.
	AllowUIDs, ReadUIDs []uint32

	// AllowNets and ReadNets are the networks a tcp or ucx owner serves
	// (verbs.NetPolicy): peers in AllowNets may read and write its exports
	// (as their access allows), peers in ReadNets only read them. Both
	// empty: the transport's default (tcp every peer that reaches the
	// address, ucx only this host's). shm has no peer addresses; setting
	// either there is refused.
	AllowNets, ReadNets []netip.Prefix

	// Directory, when set, receives a record named Name for the segment
	// (withdrawn at Close). Attrs are added to the record (keys and values
	// under the discovery record rules; export, bytes and seed are the
	// owner's own).
	Directory discovery.Directory
	Name      string
	Attrs     map[string]string

	// BenchControl serves MethodPackOnly in addition to MethodPing and
	// MethodStats (see "# Format").
	BenchControl bool

	// OnError receives errors that ended a requester's connection
	// abnormally; nil drops them.
	OnError func(error)
}

// withDefaults validates c and fills its defaults.
func (c Config) withDefaults() (Config, error) {
	bad := func(field, value, reason string) (Config, error) {
		return c, &ConfigError{Field: field, Value: value, Reason: reason}
	}
	var unknown *transports.UnknownError
	if errors.As(transports.Check(c.Transport), &unknown) {
		return bad("Transport", c.Transport, unknown.Want())
	}
	switch {
	case c.File == "" && c.Size == 0:
		return bad("File/Size", "", "set a file to serve or a size of generated data")
	case c.File != "" && c.Size != 0:
		return bad("File/Size", "", "set a file or a size of generated data, not both")
	case c.Size < 0 || c.Size > MaxDataBytes:
		return bad("Size", fmt.Sprint(c.Size), fmt.Sprintf("must lie in [1, %d]", int64(MaxDataBytes)))
	case c.Size > math.MaxInt:
		return bad("Size", fmt.Sprint(c.Size), "larger than this platform's address space")
	case c.File != "" && c.Writable && c.Transport == TransportSHM:
		return bad("Writable", c.File, "shm exports only memfd regions, so a file is copied and cannot be served writable; use tcp")
	case c.Scratch < 0 || c.Scratch > MaxDataBytes:
		return bad("Scratch", fmt.Sprint(c.Scratch), fmt.Sprintf("must lie in [0, %d]", int64(MaxDataBytes)))
	case c.StagingBytes < 0 || c.StagingSlots < 0 || c.PackWorkers < 0 || c.ParallelMin < 0:
		return bad("Staging*/PackWorkers/ParallelMin", "", "must not be negative")
	case c.ProgressTimeout < 0:
		return bad("ProgressTimeout", c.ProgressTimeout.String(), "must not be negative")
	case c.Transport != TransportSHM && len(c.AllowUIDs)+len(c.ReadUIDs) > 0:
		return bad("AllowUIDs/ReadUIDs", "", c.Transport+" has no peer credentials: admission by user is for shm")
	case c.Transport == TransportSHM && len(c.AllowNets)+len(c.ReadNets) > 0:
		return bad("AllowNets/ReadNets", "", "shm peers have no network address: admission by network is for tcp and ucx")
	case c.Directory != nil && c.Name == "":
		return bad("Name", "", "a discovery directory needs a record name")
	case c.Directory == nil && c.Name != "":
		return bad("Directory", "", "a record name needs a discovery directory")
	}
	if c.Export == "" {
		c.Export = DefaultExport
	}
	if c.Export == DefaultScratchName && c.Scratch > 0 {
		return bad("Export", c.Export, "the scratch region already uses this name")
	}
	if c.Name != "" {
		if err := discovery.ValidateName(c.Name); err != nil {
			return bad("Name", c.Name, err.Error())
		}
	}
	for k, v := range c.Attrs {
		switch k {
		case "export", "bytes", "seed":
			return bad("Attrs", k, "the owner sets this attribute of its record itself")
		}
		if c.Directory == nil {
			return bad("Attrs", k, "record attributes need a discovery directory")
		}
		rec := discovery.Record{Name: "attr-check", Transport: "tcp", Addr: "127.0.0.1:1", Attrs: map[string]string{k: v}}
		if err := rec.Validate(); err != nil {
			return bad("Attrs", k, err.Error())
		}
	}
	if c.StagingBytes == 0 {
		c.StagingBytes = DefaultStagingBytes
	}
	if c.StagingBytes < 64<<10 {
		return bad("StagingBytes", fmt.Sprint(c.StagingBytes), "must be at least 64 KiB (one staging slot)")
	}
	if c.StagingSlots == 0 {
		c.StagingSlots = DefaultStagingSlots
	}
	if c.StagingSlots > 1<<16 {
		return bad("StagingSlots", fmt.Sprint(c.StagingSlots), "at most 65536")
	}
	if c.PackWorkers == 0 {
		c.PackWorkers = min(runtime.GOMAXPROCS(0), 8)
	}
	if c.PackWorkers > 1024 {
		return bad("PackWorkers", fmt.Sprint(c.PackWorkers), "at most 1024")
	}
	if c.ParallelMin == 0 {
		c.ParallelMin = DefaultParallelMin
	}
	return c, nil
}
