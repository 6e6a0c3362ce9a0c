//go:build !cuda

package cudagather

import (
	"context"
	"errors"
	"testing"
)

func TestNotSupported(t *testing.T) {
	if Supported {
		t.Fatal("Supported without the cuda tag")
	}
	c, err := NewContext(0)
	if !errors.Is(err, ErrNotSupported) || c != nil {
		t.Fatalf("NewContext: %v, %v", c, err)
	}
	var cc Context
	if err := cc.Lookup(0, &Request{}); !errors.Is(err, ErrNotSupported) {
		t.Fatal(err)
	}
	if _, err := cc.RegisterHost(make([]byte, 8), 1, 8); !errors.Is(err, ErrNotSupported) {
		t.Fatal(err)
	}
	if _, err := cc.Capture(0, func() error { return nil }); !errors.Is(err, ErrNotSupported) {
		t.Fatal(err)
	}
	cfg := HostLookupConfig{T: 1, K: 1, RowBytes: 8, Fetch: func(context.Context, []int32, []int64, []byte) error { return nil }}
	if hl, err := cc.NewHostLookup(cfg); !errors.Is(err, ErrNotSupported) || hl != nil {
		t.Fatalf("NewHostLookup: %v, %v", hl, err)
	}
	var hl HostLookup
	if err := hl.Enqueue(0, 8, 8, 8, 0, 8, 8); !errors.Is(err, ErrNotSupported) {
		t.Fatal(err)
	}
	if _, err := cc.Capturing(0); !errors.Is(err, ErrNotSupported) {
		t.Fatal(err)
	}
	if err := cc.SetProxySpin(0); !errors.Is(err, ErrNotSupported) {
		t.Fatal(err)
	}
}

// TestHostLookupConfigCheck: the config's checks, shared by both builds.
func TestHostLookupConfigCheck(t *testing.T) {
	fetch := func(context.Context, []int32, []int64, []byte) error { return nil }
	good := HostLookupConfig{T: 4, K: 3, RowBytes: 10, Fetch: fetch}
	idBytes, rows, err := good.check()
	if err != nil || idBytes != 4 || rows != 120 || good.Timeout != DefaultHostLookupTimeout {
		t.Fatalf("%d %d %v %v", idBytes, rows, err, good.Timeout)
	}
	for name, cfg := range map[string]HostLookupConfig{
		"no rows":       {T: 0, K: 3, RowBytes: 10, Fetch: fetch},
		"too many cols": {T: 1, K: MaxColumns + 1, RowBytes: 10, Fetch: fetch},
		"row size":      {T: 1, K: 1, RowBytes: 0, Fetch: fetch},
		"no fetch":      {T: 1, K: 1, RowBytes: 8},
		"timeout":       {T: 1, K: 1, RowBytes: 8, Fetch: fetch, Timeout: -1},
		"staging size":  {T: 2, K: 2, RowBytes: 8, Fetch: fetch, Rows: make([]byte, 31)},
		"too many ids":  {T: 1 << 31, K: 2, RowBytes: 8, Fetch: fetch},
	} {
		if _, _, err := cfg.check(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
