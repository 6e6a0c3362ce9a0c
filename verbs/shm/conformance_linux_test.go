//go:build linux

package shm_test

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"
	"github.com/scatterkit/scatterkit/verbs/shm"
)

var addrs atomic.Uint64

// abstractAddr returns a fresh name in the abstract socket namespace.
func abstractAddr(testing.TB) string {
	return fmt.Sprintf("@scatterkit-test-%d-%d", os.Getpid(), addrs.Add(1))
}

var backend = verbstest.Backend{
	Name: "shm",
	New:  func() verbs.Transport { return shm.New(shm.Config{}) },
	Addr: abstractAddr,
}

func TestConformance(t *testing.T) {
	verbstest.Run(t, backend)
}
