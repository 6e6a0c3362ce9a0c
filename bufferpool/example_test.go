//go:build linux

package bufferpool_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/scatterkit/scatterkit/bufferpool"
)

// An owner leases a staging chunk, packs rows into it, hands the arena
// offset to the transport and releases the chunk after completion.
func Example() {
	pool, err := bufferpool.New(bufferpool.Config{
		Budget:  4 << 20,  // P * C_max of staging
		MinSlot: 64 << 10, // smallest chunk
		Lock:    bufferpool.LockBestEffort,
		Register: func(arena []byte) (func() error, error) {
			fmt.Printf("register %d bytes once\n", len(arena))
			return func() error { fmt.Println("deregister"); return nil }, nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	chunk, err := pool.Acquire(ctx, 100_000)
	if err != nil {
		fmt.Println(err)
		return
	}
	n := copy(chunk.Bytes(), "packed rows")
	fmt.Printf("packed %d bytes at arena offset %d (lease %d, class %d)\n",
		n, chunk.Offset(), chunk.Size(), chunk.Class())
	if err := chunk.Release(); err != nil {
		fmt.Println(err)
	}
	fmt.Println("in use after release:", pool.Stats().InUse)
	fmt.Println("close:", pool.Close())
	// Output:
	// register 4194304 bytes once
	// packed 11 bytes at arena offset 0 (lease 100000, class 131072)
	// in use after release: 0
	// deregister
	// close: <nil>
}

// TryAcquire never blocks: an exhausted pool is the signal to fall back to
// direct transfers.
func ExamplePool_TryAcquire() {
	pool, err := bufferpool.New(bufferpool.Config{Budget: 256 << 10, MinSlot: 64 << 10, NoHugePages: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	var held []bufferpool.Lease
	for {
		l, err := pool.TryAcquire(64 << 10)
		if errors.Is(err, bufferpool.ErrExhausted) {
			fmt.Printf("exhausted after %d chunks: fall back to direct\n", len(held))
			break
		}
		held = append(held, l)
	}
	for _, l := range held {
		l.Release()
	}
	// Output:
	// exhausted after 4 chunks: fall back to direct
}

// Close refuses to unmap staging that is still leased and says who holds it.
func ExamplePool_Close() {
	pool, err := bufferpool.New(bufferpool.Config{Budget: 1 << 20, NoHugePages: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	l, _ := pool.AcquireLabeled(context.Background(), 4096, "gather op 17")
	err = pool.Close()
	var leak *bufferpool.LeakError
	if errors.As(err, &leak) {
		fmt.Println(leak.Leases[0].Label, leak.Leases[0].Size)
	}
	l.Release()
	fmt.Println(pool.Close())
	// Output:
	// gather op 17 4096
	// <nil>
}
