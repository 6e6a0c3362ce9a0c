package discovery_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/scatterkit/scatterkit/verbs/discovery"
)

func ExampleMemory() {
	ctx := context.Background()
	dir := discovery.NewMemory()
	defer dir.Close()

	// An owner publishes its segment and keeps the registration open.
	reg, err := dir.Publish(ctx, discovery.Record{
		Name:      "engram/layer3",
		Transport: "tcp",
		Addr:      "127.0.0.1:7000",
		Owner:     "owner-a",
		Attrs:     map[string]string{"rkey": "42"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// A requester finds it.
	rec, err := dir.Lookup(ctx, "engram/layer3")
	fmt.Println(rec.Transport, rec.Addr, rec.Attrs["rkey"], err)

	// Nobody else can take the name while the owner holds it.
	_, err = dir.Publish(ctx, discovery.Record{Name: "engram/layer3", Transport: "shm", Addr: "/dev/shm/x"})
	var exists *discovery.ExistsError
	fmt.Println(errors.As(err, &exists), exists.Holder.Owner)

	// Withdrawn, it is gone.
	reg.Close()
	_, err = dir.Lookup(ctx, "engram/layer3")
	fmt.Println(errors.Is(err, discovery.ErrNotFound), reg.Err())
	// Output:
	// tcp 127.0.0.1:7000 42 <nil>
	// true owner-a
	// true discovery: registration withdrawn
}

func ExampleMemory_Watch() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := discovery.NewMemory()
	defer dir.Close()
	reg, _ := dir.Publish(ctx, discovery.Record{Name: "seg/a", Transport: "tcp", Addr: "127.0.0.1:1"})

	seq, err := dir.Watch(ctx, "seg/")
	if err != nil {
		fmt.Println(err)
		return
	}
	n := 0
	for ev, err := range seq {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(ev.Kind, ev.Record.Name)
		n++
		switch n {
		case 1: // the initial state has been reported: change it
			reg.Close()
		case 2:
			return // leaving the loop ends the watch
		}
	}
	// Output:
	// put seg/a
	// delete seg/a
}
