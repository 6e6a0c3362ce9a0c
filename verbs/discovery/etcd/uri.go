package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ErrInvalidURI: a directory URI Dial cannot use. See URIError.
var ErrInvalidURI = errors.New("discovery/etcd: invalid directory URI")

// URIError reports a directory URI Dial cannot use. It matches
// ErrInvalidURI.
type URIError struct {
	URI    string // with any password replaced by "xxxxx"
	Reason string
}

func (e *URIError) Error() string {
	return fmt.Sprintf("discovery/etcd: directory URI %q: %s", e.URI, e.Reason)
}

// Unwrap returns ErrInvalidURI.
func (e *URIError) Unwrap() error { return ErrInvalidURI }

// UnreachableError reports a cluster Dial could not read from within its
// timeout (no member answered, or the credentials were refused).
type UnreachableError struct {
	Endpoints []string
	Err       error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("discovery/etcd: cluster at %s: %v", strings.Join(e.Endpoints, ","), e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// IsURI reports whether s names an etcd directory (scheme etcd or etcds),
// so that a program taking either a discovery file path or a URI can tell
// them apart before dialing.
func IsURI(s string) bool {
	return strings.HasPrefix(s, "etcd://") || strings.HasPrefix(s, "etcds://")
}

// URI is a parsed directory URI (see Dial).
type URI struct {
	Endpoints []string // host:port, at least one
	TLS       bool     // scheme etcds
	Username  string
	Password  string
	Prefix    string        // ends with '/'
	TTL       time.Duration // 0: DefaultTTL
	Timeout   time.Duration // 0: DefaultTimeout
	CACert    string        // PEM file of the roots to trust (etcds; "": the system's)
	Cert, Key string        // PEM files of the client certificate (etcds, both or neither)
}

// ParseURI parses a directory URI:
//
//	etcd://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...][/PREFIX][?ttl=D&timeout=D]
//	etcds://...[?cacert=FILE&cert=FILE&key=FILE&ttl=D&timeout=D]
//
// The hosts are the cluster's client endpoints (port 2379 when left out).
// PREFIX is the key prefix of the records, made to end with '/' (none:
// DefaultPrefix); ttl is the records' lease time to live and timeout
// bounds Dial's first read and the calls made without a caller's context
// (Go durations, "10s"). etcds speaks TLS: cacert names the roots to trust
// (default the system's), cert and key a client certificate. Anything else
// is a *URIError.
func ParseURI(s string) (URI, error) {
	bad := func(format string, a ...any) (URI, error) {
		return URI{}, &URIError{URI: redact(s), Reason: fmt.Sprintf(format, a...)}
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return bad("%v", err)
	}
	var out URI
	switch u.Scheme {
	case "etcd":
	case "etcds":
		out.TLS = true
	default:
		return bad("scheme %q: want etcd or etcds", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return bad("no endpoints: want etcd://HOST:PORT[,HOST:PORT...]/PREFIX")
	}
	if u.Fragment != "" {
		return bad("a fragment (#%s) means nothing here", u.Fragment)
	}
	if u.User != nil {
		out.Username = u.User.Username()
		out.Password, _ = u.User.Password()
		if out.Username == "" {
			return bad("empty user name")
		}
	}
	for ep := range strings.SplitSeq(u.Host, ",") {
		host, port, err := net.SplitHostPort(ep)
		if err != nil {
			if !strings.Contains(err.Error(), "missing port") {
				return bad("endpoint %q: %v", ep, err)
			}
			host, port = strings.Trim(ep, "[]"), "2379"
		}
		if host == "" {
			return bad("endpoint %q: no host", ep)
		}
		if n, err := parsePort(port); err != nil || n == 0 {
			return bad("endpoint %q: port %q is not 1..65535", ep, port)
		}
		out.Endpoints = append(out.Endpoints, net.JoinHostPort(host, port))
	}
	out.Prefix = DefaultPrefix
	if p := u.Path; p != "" && p != "/" {
		if !strings.HasSuffix(p, "/") {
			p += "/"
		}
		out.Prefix = p
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return bad("query: %v", err)
	}
	for key, vals := range q {
		if len(vals) != 1 {
			return bad("parameter %s given %d times", key, len(vals))
		}
		v := vals[0]
		switch key {
		case "ttl", "timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return bad("%s=%q: want a positive duration such as 10s", key, v)
			}
			if key == "ttl" {
				out.TTL = d
			} else {
				out.Timeout = d
			}
		case "cacert", "cert", "key":
			if !out.TLS {
				return bad("%s is for etcds:// (TLS) only", key)
			}
			if v == "" {
				return bad("%s: empty file name", key)
			}
			switch key {
			case "cacert":
				out.CACert = v
			case "cert":
				out.Cert = v
			default:
				out.Key = v
			}
		default:
			return bad("unknown parameter %q (want ttl, timeout, cacert, cert, key)", key)
		}
	}
	if (out.Cert == "") != (out.Key == "") {
		return bad("cert and key go together")
	}
	return out, nil
}

func parsePort(s string) (int, error) {
	n := 0
	if s == "" || len(s) > 5 {
		return 0, errors.New("bad port")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errors.New("bad port")
		}
		n = n*10 + int(c-'0')
	}
	if n > 65535 {
		return 0, errors.New("bad port")
	}
	return n, nil
}

// redact hides a password in a URI that is echoed in an error.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// Dial opens the directory a URI names (see ParseURI) with a client of its
// own, which its Close closes after withdrawing the records published
// through it. Before returning it reads the prefix once within the
// timeout, so an unreachable cluster or refused credentials are an
// *UnreachableError here, not a stall at the first Publish. opts come after
// the URI's own settings and override them.
func Dial(ctx context.Context, uri string, opts ...Option) (*Directory, error) {
	u, err := ParseURI(uri)
	if err != nil {
		return nil, err
	}
	cc := clientv3.Config{
		Endpoints:   u.Endpoints,
		DialTimeout: DefaultTimeout,
		Username:    u.Username,
		Password:    u.Password,
		Logger:      zap.NewNop(),
	}
	if u.Timeout > 0 {
		cc.DialTimeout = u.Timeout
	}
	if u.TLS {
		if cc.TLS, err = tlsConfig(u); err != nil {
			return nil, &URIError{URI: redact(uri), Reason: err.Error()}
		}
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, &UnreachableError{Endpoints: u.Endpoints, Err: err}
	}
	all := []Option{WithPrefix(u.Prefix)}
	if u.TTL > 0 {
		all = append(all, WithTTL(u.TTL))
	}
	if u.Timeout > 0 {
		all = append(all, WithTimeout(u.Timeout))
	}
	d, err := New(cli, append(all, opts...)...)
	if err != nil {
		cli.Close()
		return nil, err
	}
	d.ownsClient = true
	rctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	if _, err := cli.Get(rctx, d.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		d.Close()
		return nil, &UnreachableError{Endpoints: u.Endpoints, Err: err}
	}
	return d, nil
}

func tlsConfig(u URI) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if u.CACert != "" {
		pem, err := os.ReadFile(u.CACert)
		if err != nil {
			return nil, fmt.Errorf("cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("cacert %s: no PEM certificate in it", u.CACert)
		}
		c.RootCAs = pool
	}
	if u.Cert != "" {
		cert, err := tls.LoadX509KeyPair(u.Cert, u.Key)
		if err != nil {
			return nil, fmt.Errorf("cert/key: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
