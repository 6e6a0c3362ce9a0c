package structobj_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"math"

	"github.com/scatterkit/scatterkit/structobj"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

// startOwner serves an owner of 16 MiB on the loopback; stop closes it.
func startOwner() (owner *structobj.Owner, stop func()) {
	tr := tcp.New(tcp.Config{})
	owner, err := structobj.NewOwner(structobj.OwnerConfig{Transport: tr, Addr: "127.0.0.1:0", ArenaBytes: 16 << 20})
	if err != nil {
		log.Fatal(err)
	}
	return owner, func() {
		if err := owner.Close(); err != nil {
			log.Fatal(err)
		}
		if err := tr.Close(); err != nil {
			log.Fatal(err)
		}
	}
}

// A PUT of an object with three members from separate buffers, and a GET
// of one member and a byte range of another.
func ExampleClient() {
	owner, stop := startOwner()
	defer stop()
	tr := tcp.New(tcp.Config{})
	defer tr.Close()
	c, err := structobj.NewClient(structobj.ClientConfig{Transport: tr, PoolBytes: 8 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	weights := make([]byte, 2*3*4) // a 2x3 float32 matrix
	for i := range 6 {
		binary.LittleEndian.PutUint32(weights[4*i:], math.Float32bits(float32(i)/2))
	}
	tokens := []byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0} // five int32s
	var b structobj.Builder
	obj, err := b.Meta("step", "42").
		NDArray("weights", structobj.DTypeFloat32, []int64{2, 3}, structobj.OrderC, weights).
		Ragged("tokens", structobj.DTypeInt32, tokens, []int64{0, 2, 5}). // rows [1 2] and [3 4 5]
		Bytes("note", []byte("hello")).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	v, err := c.Put(ctx, owner.Addr(), "run/7", obj)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("version", v, "payload", obj.Manifest.PayloadBytes, "bytes")

	m, err := c.Stat(ctx, owner.Addr(), "run/7")
	if err != nil {
		log.Fatal(err)
	}
	// The note, and the second row of tokens: values 2..4, 12 bytes from byte 8.
	sel := []structobj.Select{{Member: "note"}, {Member: "tokens", Offset: 8, Length: 12}}
	sizes, err := structobj.Sizes(m, sel)
	if err != nil {
		log.Fatal(err)
	}
	dst := [][]byte{make([]byte, sizes[0]), make([]byte, sizes[1])}
	_, info, err := c.Get(ctx, owner.Addr(), "run/7", sel, dst)
	if err != nil {
		log.Fatal(err)
	}
	row := dst[1]
	fmt.Println(string(dst[0]), binary.LittleEndian.Uint32(row), binary.LittleEndian.Uint32(row[4:]),
		binary.LittleEndian.Uint32(row[8:]), "via", info.Path)
	// Output:
	// version 1 payload 197 bytes
	// hello 3 4 5 via pool
}

// Buffers are registered pool memory: a PUT writes them and a GET reads
// into them without a staging copy.
func ExampleClient_NewBuffer() {
	owner, stop := startOwner()
	defer stop()
	tr := tcp.New(tcp.Config{})
	defer tr.Close()
	c, err := structobj.NewClient(structobj.ClientConfig{Transport: tr, PoolBytes: 8 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	src, err := c.NewBuffer(1 << 20)
	if err != nil {
		log.Fatal(err)
	}
	defer src.Release()
	for i := range src.Bytes() {
		src.Bytes()[i] = byte(i % 251)
	}
	obj, err := new(structobj.Builder).Bytes("blob", src.Bytes()).Build()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Put(ctx, owner.Addr(), "blob", obj); err != nil {
		log.Fatal(err)
	}

	dst, err := c.NewBuffer(1 << 20)
	if err != nil {
		log.Fatal(err)
	}
	defer dst.Release()
	_, info, err := c.Get(ctx, owner.Addr(), "blob", nil, [][]byte{dst.Bytes()})
	if err != nil {
		log.Fatal(err)
	}
	s := c.Stats()
	fmt.Println("read", info.Bytes, "bytes; staged", s.StagedBytes, "; straight", s.DirectBytes)
	fmt.Println(dst.Bytes()[1000], dst.Bytes()[1<<20-1])
	// Output:
	// read 1048576 bytes; staged 0 ; straight 2097152
	// 247 148
}

// Sizes tells the destination lengths of a selection: whole members (a
// ragged member's values, then its offsets) and byte ranges.
func ExampleSizes() {
	obj, err := new(structobj.Builder).
		Bytes("a", make([]byte, 10)).
		Ragged("r", structobj.DTypeInt16, make([]byte, 6), []int64{0, 1, 3}).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	sizes, err := structobj.Sizes(&obj.Manifest, []structobj.Select{
		{Member: "a"},
		{Member: "r"},
		{Member: "r", Offset: 6}, // the offsets part alone
		{Member: "", Offset: 64, Length: 6},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sizes)
	_, err = structobj.Sizes(&obj.Manifest, []structobj.Select{{Member: "a", Offset: 8, Length: 4}})
	fmt.Println(err)
	// Output:
	// [10 30 24 6]
	// structobj: invalid selection 0 (member "a"): range [8,+4) past the end (10 bytes)
}
