package transports_test

import (
	"errors"
	"fmt"

	"github.com/scatterkit/scatterkit/verbs/tcp"
	"github.com/scatterkit/scatterkit/verbs/transports"
)

// A transport picked by name (from a flag, say), with the tcp backend's
// configuration set in case it is the one picked.
func ExampleNew() {
	tr, err := transports.New("tcp", transports.Config{TCP: tcp.Config{NoChecksums: true}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()
	fmt.Println(tr.Name())

	_, err = transports.New("udp", transports.Config{})
	fmt.Println(err, errors.Is(err, transports.ErrUnknown))
	// Output:
	// tcp
	// transports: unknown transport "udp": want tcp or shm or ucx true
}

func ExampleNames() {
	fmt.Println(transports.Names())
	// Output: [tcp shm ucx]
}
