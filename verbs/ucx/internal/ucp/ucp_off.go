//go:build !ucx

package ucp

// Context stands for a UCX context in a build without UCX.
type Context struct{}

// NewContext returns ErrNotSupported: this build has no UCX.
func NewContext() (*Context, error) { return nil, ErrNotSupported }
