package engram

import (
	"context"
	"fmt"
	"strconv"
)

// LayerSpec is the shape of the older layer/head Engram API: Layers x
// Heads tables of NumRows rows of RowBytes bytes, one per (layer, head).
type LayerSpec struct {
	Layers, Heads int
	NumRows       int64
	RowBytes      int
}

// LayerTableName is the table that holds (layer, head) in a layer store.
func LayerTableName(layer, head int) string {
	return "layer" + strconv.Itoa(layer) + ".head" + strconv.Itoa(head)
}

// Tables returns the table specs of the layer shape, for Config.Tables.
func (ls LayerSpec) Tables() map[string]TableSpec {
	m := make(map[string]TableSpec, ls.Layers*ls.Heads)
	for l := range ls.Layers {
		for h := range ls.Heads {
			m[LayerTableName(l, h)] = TableSpec{NumRows: ls.NumRows, RowBytes: ls.RowBytes}
		}
	}
	return m
}

// Layers is the layer/head API as a thin view over a Store: a lookup by
// layer with [T,H] ids reads head h's ids from the table of (layer, h).
type Layers struct {
	s     *Store
	spec  LayerSpec
	names [][]string // [layer][head]
}

// OpenLayers opens a store holding the tables of spec (cfg.Tables must be
// empty: it is filled from spec) and returns its layer view. Close the
// view's Store when done.
func OpenLayers(ctx context.Context, cfg Config, spec LayerSpec) (*Layers, error) {
	if spec.Layers < 1 || spec.Heads < 1 {
		return nil, fmt.Errorf("%w: %d layers x %d heads", ErrConfig, spec.Layers, spec.Heads)
	}
	if len(cfg.Tables) != 0 {
		return nil, fmt.Errorf("%w: OpenLayers takes its tables from the layer spec", ErrConfig)
	}
	cfg.Tables = spec.Tables()
	s, err := Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	l, err := NewLayers(s, spec)
	if err != nil {
		s.Close()
		return nil, err
	}
	return l, nil
}

// NewLayers views an open store as spec's layers; the store must declare
// every (layer, head) table with spec's rows and row size.
func NewLayers(s *Store, spec LayerSpec) (*Layers, error) {
	if spec.Layers < 1 || spec.Heads < 1 {
		return nil, fmt.Errorf("%w: %d layers x %d heads", ErrConfig, spec.Layers, spec.Heads)
	}
	want := TableSpec{NumRows: spec.NumRows, RowBytes: spec.RowBytes}
	l := &Layers{s: s, spec: spec, names: make([][]string, spec.Layers)}
	for layer := range spec.Layers {
		l.names[layer] = make([]string, spec.Heads)
		for h := range spec.Heads {
			name := LayerTableName(layer, h)
			got, err := s.TableSpec(name)
			if err != nil {
				return nil, err
			}
			if got != want {
				return nil, fmt.Errorf("%w: table %q is %v, layer spec says %v", ErrConfig, name, got, want)
			}
			l.names[layer][h] = name
		}
	}
	return l, nil
}

// Store returns the underlying store.
func (l *Layers) Store() *Store { return l.s }

// Spec returns the layer shape.
func (l *Layers) Spec() LayerSpec { return l.spec }

// Populate fills the table of (layer, head) (see Store.Populate).
func (l *Layers) Populate(layer, head int, rows []byte) error {
	if err := l.check(layer, head); err != nil {
		return err
	}
	return l.s.Populate(l.names[layer][head], rows)
}

// Lookup gathers layer's rows for [T,H] ids (ids.K must be Heads) into
// out, exactly as Store.Lookup with the layer's H tables as columns.
func (l *Layers) Lookup(layer int, ids IDs, out Output, opts *LookupOptions) error {
	return l.LookupContext(context.Background(), layer, ids, out, opts)
}

// LookupContext is Lookup with a context (see Store.LookupContext).
func (l *Layers) LookupContext(ctx context.Context, layer int, ids IDs, out Output, opts *LookupOptions) error {
	if err := l.check(layer, 0); err != nil {
		return err
	}
	return l.s.LookupContext(ctx, l.names[layer], ids, out, opts)
}

func (l *Layers) check(layer, head int) error {
	if layer < 0 || layer >= l.spec.Layers || head < 0 || head >= l.spec.Heads {
		return fmt.Errorf("%w: layer %d head %d of %d x %d", ErrBadLayer, layer, head, l.spec.Layers, l.spec.Heads)
	}
	return nil
}
