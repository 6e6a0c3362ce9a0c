//go:build !ucx

package ucp

import (
	"errors"
	"testing"
)

func TestNotSupported(t *testing.T) {
	if _, err := NewContext(); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("NewContext without the ucx tag: %v, want ErrNotSupported", err)
	}
}
