// Package dirspec opens the segment directory a command-line flag or a
// config string names, so that scatterd, engramctl and the C API take the
// same spellings:
//
//	off (or "")                       no directory
//	PATH, file://PATH                 the embedded file directory of one host
//	                                  (verbs/discovery.NewFile)
//	etcd://HOST:PORT[,...]/PREFIX...  a cluster directory on etcd
//	etcds://...                       the same over TLS (verbs/discovery/etcd.ParseURI)
//
// It is the one place of the tools module that imports the etcd module,
// so the core modules never link etcd.
package dirspec

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/scatterkit/scatterkit/verbs/discovery"
	"github.com/scatterkit/scatterkit/verbs/discovery/etcd"
)

// Off is the spelling of "no directory".
const Off = "off"

// ErrSpec: a directory spec neither a path nor a URI this package knows.
var ErrSpec = errors.New("dirspec: bad directory spec")

// Open opens the directory spec names; nil (and no error) for Off or "".
// The caller closes it. Errors: ErrSpec for an unknown scheme or a bad
// etcd URI (then also the etcd module's *URIError), the etcd module's
// *UnreachableError for a cluster that does not answer, the file
// directory's errors.
func Open(ctx context.Context, spec string) (discovery.Directory, error) {
	switch {
	case spec == "" || spec == Off:
		return nil, nil
	case etcd.IsURI(spec):
		d, err := etcd.Dial(ctx, spec)
		if errors.Is(err, etcd.ErrInvalidURI) {
			return nil, fmt.Errorf("%w: %w", ErrSpec, err)
		}
		if err != nil {
			return nil, err
		}
		return d, nil
	case strings.HasPrefix(spec, "file://"):
		path := strings.TrimPrefix(spec, "file://")
		if path == "" {
			return nil, fmt.Errorf("%w %q: no path after file://", ErrSpec, spec)
		}
		return discovery.NewFile(path)
	case strings.Contains(spec, "://"):
		return nil, fmt.Errorf("%w %q: want a file path, file://PATH, etcd://HOST:PORT/PREFIX or etcds://...", ErrSpec, Describe(spec))
	}
	return discovery.NewFile(spec)
}

// Describe returns spec fit for logs and events: a URI's password
// replaced by "xxxxx".
func Describe(spec string) string {
	if !strings.Contains(spec, "://") {
		return spec
	}
	u, err := url.Parse(spec)
	if err != nil {
		return spec
	}
	return u.Redacted()
}
