//go:build !linux

package discovery

import (
	"context"
	"io/fs"
)

// The File backend needs /proc to tell live owners from dead ones; elsewhere
// NewFile returns ErrNotSupported.

func selfHolder() (holder, error) { return holder{}, ErrNotSupported }

func processAlive(h, self holder) bool { return true }

func lockFile(ctx context.Context, path string) (func(), error) { return nil, ErrNotSupported }

func fileID(fi fs.FileInfo) (dev, ino uint64, ok bool) { return 0, 0, false }
