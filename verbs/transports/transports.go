package transports

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/shm"
	"github.com/scatterkit/scatterkit/verbs/tcp"
	"github.com/scatterkit/scatterkit/verbs/ucx"
)

// Config configures the backends New builds: New uses the field of the
// backend it builds and ignores the others. The zero value is every
// backend's defaults.
type Config struct {
	TCP tcp.Config
	SHM shm.Config
	UCX ucx.Config
}

// backend is one known transport.
type backend struct {
	name      string
	new       func(Config) (verbs.Transport, error)
	localAddr func(tag string) string
}

// backends are the known transports, in the order Names lists them.
var backends = [...]backend{
	{name: "tcp", new: func(c Config) (verbs.Transport, error) { return tcp.New(c.TCP), nil },
		localAddr: func(string) string { return "127.0.0.1:0" }},
	{name: "shm", new: func(c Config) (verbs.Transport, error) { return shm.New(c.SHM), nil },
		localAddr: shmAddr},
	// ucx: in a build without the ucx tag New fails with an error wrapping
	// verbs.ErrNotSupported (see ucx.Supported).
	{name: "ucx", new: newUCX,
		localAddr: func(string) string { return "127.0.0.1:0" }},
}

func newUCX(c Config) (verbs.Transport, error) {
	t, err := ucx.New(c.UCX)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Names returns the names of the known transports: "tcp", "shm", then
// "ucx" (known in every build; usable in one with the ucx tag).
func Names() []string {
	names := make([]string, len(backends))
	for i := range backends {
		names[i] = backends[i].name
	}
	return names
}

func lookup(name string) (*backend, error) {
	for i := range backends {
		if backends[i].name == name {
			return &backends[i], nil
		}
	}
	return nil, &UnknownError{Name: name}
}

// Check returns nil when name is a known transport, else an
// *UnknownError.
func Check(name string) error {
	_, err := lookup(name)
	return err
}

// New returns a new transport of the backend name, configured by cfg's
// field for it; its Name is name. For a name that is no known transport
// it returns an *UnknownError; for ucx in a build without UCX, an error
// wrapping verbs.ErrNotSupported, and when UCX cannot start, its error.
func New(name string, cfg Config) (verbs.Transport, error) {
	b, err := lookup(name)
	if err != nil {
		return nil, err
	}
	return b.new(cfg)
}

// LocalAddr returns a listen address for a segment of the backend name
// that only this host reaches: "127.0.0.1:0" on tcp (Listen picks the
// port; see Segment.Addr), and on shm a socket in the abstract namespace,
// "@tag-<pid>-<n>", that no other call of this process returns. For a
// name that is no known transport it returns an *UnknownError.
func LocalAddr(name, tag string) (string, error) {
	b, err := lookup(name)
	if err != nil {
		return "", err
	}
	return b.localAddr(tag), nil
}

var shmAddrs atomic.Uint64

func shmAddr(tag string) string {
	return fmt.Sprintf("@%s-%d-%d", tag, os.Getpid(), shmAddrs.Add(1))
}
