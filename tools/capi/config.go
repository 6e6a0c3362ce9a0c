package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/scatterkit/scatterkit/engram"
	"github.com/scatterkit/scatterkit/tools/internal/dirspec"
)

// openConfig is sk_open's config_json (docs/capi.md).
type openConfig struct {
	Namespace        string                 `json:"namespace"`
	Tables           map[string]tableConfig `json:"tables"`
	LocalDir         string                 `json:"local_dir"`
	Remote           *remoteConfig          `json:"remote"`
	Workers          int                    `json:"workers"`
	Pin              string                 `json:"pin"`
	SkipRowChecksums bool                   `json:"skip_row_checksums"`
}

type tableConfig struct {
	NumRows  int64 `json:"num_rows"`
	RowBytes int   `json:"row_bytes"`
}

type remoteConfig struct {
	// Transport is a verbs/transports name; "" means "tcp".
	Transport string        `json:"transport"`
	Addr      string        `json:"addr"`
	Shards    []shardConfig `json:"shards"`
	// Directory names a directory (package tools/internal/dirspec: a
	// discovery file, etcd://...) whose records place the namespace's
	// tables (engram.RemoteConfig.Directory).
	Directory   string `json:"directory"`
	BufferBytes int64  `json:"buffer_bytes"`
	// CaptureSpinUS is how long, in microseconds, the proxy of the
	// store's lookups captured into CUDA graphs polls busily after a
	// request (cudagather's SetProxySpin; nil: its default, 2000).
	CaptureSpinUS *int64 `json:"capture_spin_us"`
}

// shardConfig is engram.RemoteShard in config_json: rows [lo, hi) of
// table on the owners at addrs (replicas, in order), each serving them as
// its table served (default: table).
type shardConfig struct {
	Table  string   `json:"table"`
	Served string   `json:"served"`
	Lo     int64    `json:"lo"`
	Hi     int64    `json:"hi"`
	Addrs  []string `json:"addrs"`
}

// parseConfig decodes config_json strictly: unknown keys, trailing data
// and values of the wrong type are an *ArgError. It returns the engram
// configuration (Remote left nil: the caller makes its transport) and the
// remote part, nil for a local store.
func parseConfig(b []byte) (engram.Config, *remoteConfig, error) {
	var oc openConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&oc); err != nil {
		return engram.Config{}, nil, badArg("config_json", "%v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return engram.Config{}, nil, badArg("config_json", "data after the JSON object")
	}
	cfg := engram.Config{
		Namespace:        oc.Namespace,
		Dir:              oc.LocalDir,
		Workers:          oc.Workers,
		SkipRowChecksums: oc.SkipRowChecksums,
	}
	if oc.Workers < 0 {
		return engram.Config{}, nil, badArg("config_json", "workers %d: negative", oc.Workers)
	}
	switch oc.Pin {
	case "", "best-effort":
		cfg.Pin = engram.PinBestEffort
	case "none":
		cfg.Pin = engram.PinNone
	case "require":
		cfg.Pin = engram.PinRequired
	default:
		return engram.Config{}, nil, badArg("config_json", "pin %q: want best-effort, none or require", oc.Pin)
	}
	if oc.Tables != nil {
		cfg.Tables = make(map[string]engram.TableSpec, len(oc.Tables))
		for name, t := range oc.Tables {
			cfg.Tables[name] = engram.TableSpec{NumRows: t.NumRows, RowBytes: t.RowBytes}
		}
	}
	if oc.Remote != nil {
		if oc.LocalDir != "" {
			return engram.Config{}, nil, fmt.Errorf("%w: set exactly one of local_dir and remote", engram.ErrConfig)
		}
		if oc.Remote.BufferBytes < 0 {
			return engram.Config{}, nil, badArg("config_json", "remote.buffer_bytes %d: negative", oc.Remote.BufferBytes)
		}
		if v := oc.Remote.CaptureSpinUS; v != nil && (*v < 0 || *v > 60_000_000) {
			return engram.Config{}, nil, badArg("config_json", "remote.capture_spin_us %d: want 0 to 60,000,000", *v)
		}
		if oc.Remote.Transport == "" {
			oc.Remote.Transport = "tcp"
		}
		set := 0
		for _, b := range []bool{oc.Remote.Addr != "", len(oc.Remote.Shards) > 0, oc.Remote.Directory != ""} {
			if b {
				set++
			}
		}
		if set != 1 {
			return engram.Config{}, nil, badArg("config_json", "remote: set exactly one of addr, shards and directory")
		}
		if oc.Remote.Directory == dirspec.Off {
			return engram.Config{}, nil, badArg("config_json", "remote.directory %q: names no directory", dirspec.Off)
		}
	}
	return cfg, oc.Remote, nil
}
