package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/scatterkit/scatterkit/engram"
	"github.com/scatterkit/scatterkit/tools/internal/dirspec"
	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/discovery"
	"github.com/scatterkit/scatterkit/verbs/transports"
)

// The live objects behind the handles, one table per kind.
var (
	stores  = newHandles[storeObj](kindStore)
	columns = newHandles[columnsObj](kindColumns)
	writers = newHandles[writerObj](kindWriter)
	buffers = newHandles[bufferObj](kindBuffer)
	servers = newHandles[serverObj](kindServer)
	devices = newHandles[deviceObj](kindDevice)
)

// storeObj is an open store and what was made from it: sk_close frees
// every columns, writer, buffer, server and device handle of the store.
type storeObj struct {
	s  *engram.Store
	tr verbs.Transport // a remote store's transport, closed after the store
	// captureSpin is remote.capture_spin_us (-1: not set), applied to
	// each attachment's context.
	captureSpin time.Duration

	mu      sync.Mutex
	closed  bool
	cols    map[uint64]*columnsObj
	writers map[uint64]*writerObj
	buffers map[uint64]*bufferObj
	servers map[uint64]*serverObj
	devices map[uint64]*deviceObj
}

// getStore resolves a store handle.
func getStore(h uint64) (*storeObj, error) {
	st := stores.get(h)
	if st == nil {
		return nil, &HandleError{Handle: h, Want: kindStore}
	}
	return st, nil
}

// adopt registers a child of st under a new handle of hs, in the set
// that field returns, unless st is closing (both under st.mu, so sk_close
// never misses a child).
func adopt[T any](st *storeObj, hs *handles[T], v *T, field func(*storeObj) map[uint64]*T) (uint64, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return 0, engram.ErrClosed
	}
	h, err := hs.add(v)
	if err != nil {
		return 0, err
	}
	field(st)[h] = v
	return h, nil
}

// disown removes a child's handle from st's set and reports whether it
// was there: false means sk_close took the set and releases the child.
func disown[T any](st *storeObj, field func(*storeObj) map[uint64]*T, h uint64) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	m := field(st)
	_, ok := m[h]
	delete(m, h)
	return ok
}

func colsOf(st *storeObj) map[uint64]*columnsObj   { return st.cols }
func writersOf(st *storeObj) map[uint64]*writerObj { return st.writers }
func buffersOf(st *storeObj) map[uint64]*bufferObj { return st.buffers }
func serversOf(st *storeObj) map[uint64]*serverObj { return st.servers }
func devicesOf(st *storeObj) map[uint64]*deviceObj { return st.devices }

// open is sk_open.
func open(configJSON []byte) (uint64, error) {
	cfg, rc, err := parseConfig(configJSON)
	if err != nil {
		return 0, err
	}
	st := &storeObj{cols: map[uint64]*columnsObj{}, writers: map[uint64]*writerObj{},
		buffers: map[uint64]*bufferObj{}, servers: map[uint64]*serverObj{}, devices: map[uint64]*deviceObj{}}
	if rc != nil {
		tr, err := transports.New(rc.Transport, transports.Config{})
		if err != nil {
			return 0, err
		}
		st.tr = tr
		st.captureSpin = -1
		if rc.CaptureSpinUS != nil {
			st.captureSpin = time.Duration(*rc.CaptureSpinUS) * time.Microsecond
		}
		cfg.Remote = &engram.RemoteConfig{Transport: tr, Addr: rc.Addr, BufferBytes: rc.BufferBytes}
		for _, sh := range rc.Shards {
			cfg.Remote.Shards = append(cfg.Remote.Shards, engram.RemoteShard{Table: sh.Table, Served: sh.Served, Lo: sh.Lo, Hi: sh.Hi, Addrs: sh.Addrs})
		}
		if rc.Directory != "" {
			// The records place the tables at open; the store keeps no
			// use of the directory after that.
			d, err := dirspec.Open(context.Background(), rc.Directory)
			if err != nil {
				if errors.Is(err, dirspec.ErrSpec) {
					err = badArg("config_json", "remote.directory: %v", err)
				}
				return 0, errors.Join(err, tr.Close())
			}
			defer d.Close()
			cfg.Remote.Directory = d
		}
	}
	s, err := engram.Open(context.Background(), cfg)
	if err != nil {
		if st.tr != nil {
			err = errors.Join(err, st.tr.Close())
		}
		return 0, err
	}
	st.s = s
	h, err := stores.add(st)
	if err != nil {
		return 0, errors.Join(err, st.release())
	}
	return h, nil
}

// closeStore is sk_close: the handle goes first (so later calls fail
// SK_ECLOSED), then the store's children, then the store, which waits
// for the lookups in flight.
func closeStore(h uint64) error {
	st := stores.take(h)
	if st == nil {
		return &HandleError{Handle: h, Want: kindStore}
	}
	return st.release()
}

// release closes everything of st in an order that keeps every memory
// access valid: populate streams are aborted (nothing published), device
// attachments detached (the device's pending work first, then the tables'
// unmapping, while the snapshots are still mapped) and servers closed
// with their transports; a remote store's buffers are
// released before the store closes (it refuses to close with leases out),
// a local store's unmapped after (its close waits for lookups that may be
// writing them); then the remote transport closes and the columns go.
func (st *storeObj) release() error {
	st.mu.Lock()
	st.closed = true
	cols, ws, bs, svs, ds := st.cols, st.writers, st.buffers, st.servers, st.devices
	st.cols, st.writers, st.buffers, st.servers, st.devices = nil, nil, nil, nil, nil
	st.mu.Unlock()

	var errs []error
	for h, w := range ws {
		writers.take(h)
		w.abort()
	}
	for h, d := range ds {
		devices.take(h)
		errs = append(errs, d.release())
	}
	for h, sv := range svs {
		servers.take(h)
		errs = append(errs, sv.release())
	}
	remote := st.tr != nil
	if remote {
		for h, b := range bs {
			buffers.take(h)
			errs = append(errs, b.release())
		}
	}
	if st.s != nil {
		errs = append(errs, st.s.Close())
	}
	if !remote {
		for h, b := range bs {
			buffers.take(h)
			errs = append(errs, b.release())
		}
	}
	if remote {
		errs = append(errs, st.tr.Close())
	}
	for h := range cols {
		columns.take(h)
	}
	return errors.Join(errs...)
}

// tableSpec is sk_table_spec.
func tableSpec(h uint64, name string) (engram.TableSpec, bool, error) {
	st, err := getStore(h)
	if err != nil {
		return engram.TableSpec{}, false, err
	}
	spec, err := st.s.TableSpec(name)
	if err != nil {
		return engram.TableSpec{}, false, err
	}
	populated, err := st.s.Populated(name)
	if err != nil {
		return engram.TableSpec{}, false, err
	}
	return spec, populated, nil
}

// remove is sk_remove.
func remove(h uint64, name string) error {
	st, err := getStore(h)
	if err != nil {
		return err
	}
	return st.s.Remove(name)
}

// serverObj is a Server and the transport it serves on (which the
// Server does not close).
type serverObj struct {
	st  *storeObj
	sv  *engram.Server
	tr  verbs.Transport
	dir discovery.Directory // sk_serve_publish's, nil for sk_serve
}

// release closes the server (which withdraws its records), then its
// directory and transport.
func (o *serverObj) release() error {
	err := o.sv.Close()
	if o.dir != nil {
		err = errors.Join(err, o.dir.Close())
	}
	return errors.Join(err, o.tr.Close())
}

// serve is sk_serve and sk_serve_publish (directory "": none); addr "" is
// a listen address only this host reaches (transports.LocalAddr).
func serve(h uint64, transport, addr, directory string) (uint64, string, error) {
	st, err := getStore(h)
	if err != nil {
		return 0, "", err
	}
	if addr == "" {
		if addr, err = transports.LocalAddr(transport, "scatterkit"); err != nil {
			return 0, "", err
		}
	}
	if directory == dirspec.Off {
		return 0, "", badArg("directory", "%q names no directory (sk_serve publishes nothing)", directory)
	}
	dir, err := dirspec.Open(context.Background(), directory)
	if err != nil {
		if errors.Is(err, dirspec.ErrSpec) {
			err = badArg("directory", "%v", err)
		}
		return 0, "", err
	}
	tr, err := transports.New(transport, transports.Config{})
	if err != nil {
		if dir != nil {
			err = errors.Join(err, dir.Close())
		}
		return 0, "", err
	}
	sv, err := st.s.Serve(engram.ServeConfig{Transport: tr, Addr: addr, Directory: dir})
	if err != nil {
		if dir != nil {
			err = errors.Join(err, dir.Close())
		}
		return 0, "", errors.Join(err, tr.Close())
	}
	o := &serverObj{st: st, sv: sv, tr: tr, dir: dir}
	sh, err := adopt(st, servers, o, serversOf)
	if err != nil {
		return 0, "", errors.Join(err, o.release())
	}
	return sh, sv.Addr(), nil
}

// closeServer is sk_server_close.
func closeServer(h uint64) error {
	o := servers.take(h)
	if o == nil {
		return &HandleError{Handle: h, Want: kindServer}
	}
	if !disown(o.st, serversOf, h) {
		return nil // the store's close has it
	}
	return o.release()
}
