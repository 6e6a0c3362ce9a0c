package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/scatterkit/scatterkit/engram"
	"github.com/scatterkit/scatterkit/tools/internal/dirspec"
	"github.com/scatterkit/scatterkit/verbs/transports"
)

// cmdServe serves the namespace's populated tables until ctx ends or the
// process gets SIGINT or SIGTERM, publishing a record per table (with
// its shard's place, from the manifest) in the directory disc names
// (a discovery file or an etcd URI, package dirspec), so remote
// stores find the tables by namespace.
func cmdServe(ctx context.Context, dir, ns, transport, listen, disc string, staging int64, stdout io.Writer) error {
	s, m, err := openStore(ctx, dir, ns, nil, engram.PinBestEffort)
	if err != nil {
		return err
	}
	defer s.Close()
	tr, err := transports.New(transport, transports.Config{})
	if err != nil {
		return err
	}
	defer tr.Close()
	if listen == "" {
		listen = "127.0.0.1:0"
		if transport == "shm" {
			listen = fmt.Sprintf("@engramctl-%d-%d", os.Getpid(), time.Now().UnixNano())
		}
	}
	cfg := engram.ServeConfig{Transport: tr, Addr: listen, StagingBytes: staging, Shards: map[string]engram.ShardOf{}}
	for name, t := range m.Tables {
		if t.ShardOf.Table != "" {
			cfg.Shards[name] = engram.ShardOf{Table: t.ShardOf.Table, Lo: t.ShardOf.Lo}
		}
	}
	d, err := dirspec.Open(ctx, disc)
	if err != nil {
		return err
	}
	if d != nil {
		defer d.Close()
		cfg.Directory = d
	}
	srv, err := s.Serve(cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	ready, _ := json.Marshal(map[string]any{"event": "ready", "namespace": ns, "transport": transport, "addr": srv.Addr(),
		"tables": srv.Tables(), "discovery": dirspec.Describe(disc), "pid": os.Getpid()})
	fmt.Fprintf(stdout, "%s\n", ready)
	sctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-sctx.Done()
	return srv.Close()
}

// cmdRecords lists the records of namespace ns in the directory disc
// names: one
// line per served table and owner.
func cmdRecords(ctx context.Context, disc, ns string, stdout io.Writer) error {
	d, err := dirspec.Open(ctx, disc)
	if err != nil {
		return err
	}
	if d == nil {
		return nil
	}
	defer d.Close()
	recs, err := d.List(ctx, engram.DirectoryPrefix(ns))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "served in %s: %d record(s)\n", dirspec.Describe(disc), len(recs))
	for _, r := range recs {
		served := strings.TrimPrefix(r.Name, engram.DirectoryPrefix(ns))
		if i := strings.LastIndexByte(served, '/'); i > 0 {
			served = served[:i]
		}
		fmt.Fprintf(stdout, "  %-24s rows [%s, %s) of %-16s %s://%s (%s)\n", served, r.Attrs["lo"], r.Attrs["hi"], r.Attrs["table"],
			r.Transport, r.Addr, r.Owner)
	}
	return nil
}
