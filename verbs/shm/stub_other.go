//go:build !linux

package shm

import (
	"context"
	"fmt"

	"github.com/scatterkit/scatterkit/verbs"
)

// Transport is the shared-memory backend; it needs Linux (memfd,
// SCM_RIGHTS). Elsewhere every method fails with verbs.ErrNotSupported.
type Transport struct{}

var _ verbs.Transport = (*Transport)(nil)

var errPlatform = fmt.Errorf("shm: needs linux: %w", verbs.ErrNotSupported)

// New returns a transport whose methods fail with ErrNotSupported.
func New(Config) *Transport { return &Transport{} }

// Name implements verbs.Transport: "shm".
func (*Transport) Name() string { return "shm" }

// Register fails with ErrNotSupported.
func (*Transport) Register([]byte, verbs.Access) (*verbs.Region, error) { return nil, errPlatform }

// Alloc fails with ErrNotSupported.
func (*Transport) Alloc(int, verbs.Access) (*verbs.Region, error) { return nil, errPlatform }

// Deregister fails with ErrNotSupported.
func (*Transport) Deregister(*verbs.Region) error { return errPlatform }

// Listen fails with ErrNotSupported.
func (*Transport) Listen(string, []verbs.Export, verbs.ListenOptions) (verbs.Segment, error) {
	return nil, errPlatform
}

// Connect fails with ErrNotSupported.
func (*Transport) Connect(context.Context, string, verbs.ConnectOptions) (verbs.Conn, error) {
	return nil, errPlatform
}

// Close does nothing.
func (*Transport) Close() error { return nil }
