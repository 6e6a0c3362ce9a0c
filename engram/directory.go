package engram

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/scatterkit/scatterkit/verbs/discovery"
)

// Directory records of served tables (ServeConfig.Directory): one record
// per served table and server, named
//
//	engram/<namespace>/<served table>/<owner id>
//
// (owner id: 16 hex digits of a hash of the server's transport and
// address, so replicas of one table have distinct names), with the
// server's transport and address, and attributes
//
//	table      the table the served one is a shard of (itself when whole)
//	lo, hi     the shard's rows of that table, [lo, hi)
//	row_bytes  its row size
//
// A remote store opened with RemoteConfig.Directory (and neither Addr nor
// Shards) lists engram/<namespace>/ and places every table it opens from
// the records: the records of one (table, served name, lo, hi) are one
// shard's replicas, in the order of their names. A record lives while its
// server does: Server.Close withdraws it, and the directory drops the
// records of an owner that died (the file directory by its pid, etcd by
// its lease's TTL).

// DirectoryPrefix is where the records of namespace ns live.
func DirectoryPrefix(ns string) string { return "engram/" + ns + "/" }

// ShardOf places a served table inside a larger one: its rows are rows
// [Lo, Lo+its rows) of Table.
type ShardOf struct {
	Table string
	Lo    int64
}

// publish puts one record per served table in d; on error it withdraws
// what it published.
func (sv *Server) publish(ctx context.Context, d discovery.Directory, transport string, shards map[string]ShardOf) (err error) {
	h := fnv.New64a()
	h.Write([]byte(transport + "\x00" + sv.srv.Addr()))
	id := fmt.Sprintf("%016x", h.Sum64())
	defer func() {
		if err != nil {
			sv.withdraw()
		}
	}()
	for _, t := range sv.srv.Specs() {
		table, lo := t.Name, int64(0)
		if at, ok := shards[t.Name]; ok {
			table, lo = at.Table, at.Lo
		}
		rec := discovery.Record{Name: DirectoryPrefix(sv.s.ns) + t.Name + "/" + id, Transport: transport, Addr: sv.srv.Addr(),
			Attrs: map[string]string{"table": table, "lo": strconv.FormatInt(lo, 10), "hi": strconv.FormatInt(lo+t.NumRows, 10),
				"row_bytes": strconv.Itoa(t.RowBytes)}}
		reg, err := d.Publish(ctx, rec)
		if err != nil {
			return fmt.Errorf("engram: serve: publish %s: %w", rec.Name, err)
		}
		sv.regs = append(sv.regs, reg)
	}
	return nil
}

// withdraw closes the server's registrations.
func (sv *Server) withdraw() error {
	var errs []error
	for _, r := range sv.regs {
		if err := r.Close(); err != nil && !errors.Is(err, discovery.ErrWithdrawn) && !errors.Is(err, discovery.ErrClosed) {
			errs = append(errs, err)
		}
	}
	sv.regs = nil
	return errors.Join(errs...)
}

// DirectoryError reports a directory record a remote store could not use.
type DirectoryError struct {
	Record string
	Reason string
}

func (e *DirectoryError) Error() string {
	return fmt.Sprintf("engram: directory record %q: %s", e.Record, e.Reason)
}

// Unwrap returns ErrConfig.
func (e *DirectoryError) Unwrap() error { return ErrConfig }

// shardsFromDirectory places the tables names from the records of
// namespace ns served over transport.
func shardsFromDirectory(ctx context.Context, d discovery.Directory, ns, transport string, names []string) ([]RemoteShard, error) {
	recs, err := d.List(ctx, DirectoryPrefix(ns))
	if err != nil {
		return nil, fmt.Errorf("engram: directory: %w", err)
	}
	type key struct {
		table, served string
		lo, hi        int64
	}
	var order []key
	addrs := map[key][]string{}
	for _, rec := range recs {
		rest := strings.TrimPrefix(rec.Name, DirectoryPrefix(ns))
		cut := strings.LastIndexByte(rest, '/')
		served := rest[:max(cut, 0)]
		if cut <= 0 {
			return nil, &DirectoryError{Record: rec.Name, Reason: "not <prefix>/<table>/<owner id>"}
		}
		table := rec.Attrs["table"]
		if !slices.Contains(names, table) || rec.Transport != transport {
			continue // another table's, or another transport's
		}
		lo, err1 := strconv.ParseInt(rec.Attrs["lo"], 10, 64)
		hi, err2 := strconv.ParseInt(rec.Attrs["hi"], 10, 64)
		if err1 != nil || err2 != nil || lo < 0 || hi <= lo {
			return nil, &DirectoryError{Record: rec.Name, Reason: fmt.Sprintf("rows [%q, %q): want 0 <= lo < hi", rec.Attrs["lo"], rec.Attrs["hi"])}
		}
		k := key{table, served, lo, hi}
		if _, seen := addrs[k]; !seen {
			order = append(order, k)
		}
		addrs[k] = append(addrs[k], rec.Addr)
	}
	out := make([]RemoteShard, len(order))
	for i, k := range order {
		out[i] = RemoteShard{Table: k.table, Served: k.served, Lo: k.lo, Hi: k.hi, Addrs: addrs[k]}
	}
	return out, nil
}
