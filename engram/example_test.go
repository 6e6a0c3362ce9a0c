package engram_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/scatterkit/scatterkit/engram"
)

func Example() {
	dir, err := os.MkdirTemp("", "engram-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// A table of 4 rows of 8 bytes: row i holds the bytes i*8 .. i*8+7.
	spec := engram.TableSpec{NumRows: 4, RowBytes: 8}
	s, err := engram.Open(context.Background(), engram.Config{
		Tables:    map[string]engram.TableSpec{"ngram2": spec},
		Namespace: "demo",
		Dir:       dir,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	rows := make([]byte, spec.Size())
	for i := range rows {
		rows[i] = byte(i)
	}
	if err := s.Populate("ngram2", rows); err != nil {
		log.Fatal(err)
	}

	// Two tokens, two columns naming the same table; -1 skips.
	const T, K, R = 2, 2, 8
	ids := []int32{3, 0, -1, 1}
	out := make([]byte, T*K*R)
	err = s.Lookup([]string{"ngram2", "ngram2"}, engram.IDs32(ids, T, K), engram.TokenMajor(out, T, K, R), nil)
	if err != nil {
		log.Fatal(err)
	}
	for i := range T * K {
		fmt.Println(out[i*R : (i+1)*R])
	}

	// Tables are create-only.
	err = s.Populate("ngram2", rows)
	fmt.Println(err != nil)
	// Output:
	// [24 25 26 27 28 29 30 31]
	// [0 1 2 3 4 5 6 7]
	// [0 0 0 0 0 0 0 0]
	// [8 9 10 11 12 13 14 15]
	// true
}
