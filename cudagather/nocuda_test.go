//go:build !cuda

package cudagather

import (
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
}
