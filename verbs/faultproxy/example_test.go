package faultproxy_test

import (
	"fmt"
	"io"
	"log"
	"net"

	"github.com/scatterkit/scatterkit/verbs/faultproxy"
)

// A proxy in front of an echo server flips one byte of the reply stream.
func Example() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()

	p, err := faultproxy.New(ln.Addr().String(), faultproxy.Options{Seed: 7})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// Byte 4 of what comes back is XORed with a mask drawn from the seed.
	if err := p.Set(faultproxy.Fault{Kind: faultproxy.Corrupt, Dir: faultproxy.Down, After: 4}); err != nil {
		log.Fatal(err)
	}
	msg := []byte("scatterkit")
	if _, err := c.Write(msg); err != nil {
		log.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		log.Fatal(err)
	}
	for i := range msg {
		if got[i] != msg[i] {
			fmt.Printf("byte %d changed\n", i)
		}
	}
	st := p.Stats()
	fmt.Println("flipped", st.Flipped, "up", st.Up, "down", st.Down)
	// Output:
	// byte 4 changed
	// flipped 1 up 10 down 10
}
