//go:build !ucx

package ucx

import (
	"context"
	"fmt"

	"github.com/scatterkit/scatterkit/verbs"
)

// Transport is the UCX backend of verbs.Transport; this build has no UCX
// (build with the ucx tag and libucx-dev installed): New fails with
// verbs.ErrNotSupported.
type Transport struct{}

var _ verbs.Transport = (*Transport)(nil)

var errOff = fmt.Errorf("ucx: built without the ucx tag: %w", verbs.ErrNotSupported)

// New fails with an error wrapping verbs.ErrNotSupported.
func New(Config) (*Transport, error) { return nil, errOff }

// Supported reports whether this build has UCX support.
func Supported() bool { return false }

func (*Transport) Name() string                                         { return "ucx" }
func (*Transport) Register([]byte, verbs.Access) (*verbs.Region, error) { return nil, errOff }
func (*Transport) Alloc(int, verbs.Access) (*verbs.Region, error)       { return nil, errOff }
func (*Transport) Deregister(*verbs.Region) error                       { return errOff }
func (*Transport) Listen(string, []verbs.Export, verbs.ListenOptions) (verbs.Segment, error) {
	return nil, errOff
}
func (*Transport) Connect(context.Context, string, verbs.ConnectOptions) (verbs.Conn, error) {
	return nil, errOff
}
func (*Transport) Close() error { return nil }
