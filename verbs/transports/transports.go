package transports

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/shm"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

// Config configures the backends New builds: New uses the field of the
// backend it builds and ignores the others. The zero value is every
// backend's defaults.
type Config struct {
	TCP tcp.Config
	SHM shm.Config
}

// backend is one known transport.
type backend struct {
	name      string
	new       func(Config) verbs.Transport
	localAddr func(tag string) string
}

// backends are the known transports, in the order Names lists them.
var backends = [...]backend{
	{name: "tcp", new: func(c Config) verbs.Transport { return tcp.New(c.TCP) },
		localAddr: func(string) string { return "127.0.0.1:0" }},
	{name: "shm", new: func(c Config) verbs.Transport { return shm.New(c.SHM) },
		localAddr: shmAddr},
}

// Names returns the names of the known transports: "tcp", then "shm".
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
// it returns an *UnknownError.
func New(name string, cfg Config) (verbs.Transport, error) {
	b, err := lookup(name)
	if err != nil {
		return nil, err
	}
	return b.new(cfg), nil
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
