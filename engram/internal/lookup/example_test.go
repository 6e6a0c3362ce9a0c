package lookup_test

import (
	"errors"
	"fmt"

	"github.com/scatterkit/scatterkit/engram/internal/lookup"
)

// A [T=2, K=3] lookup of 4-byte rows: columns 0 and 2 read one table with
// global ids starting at 100, column 1 another table; -1 leaves its output
// row as it was.
func ExampleLookup() {
	const rowBytes = 4
	ngram := []byte("n100n101n102n103")
	other := []byte("o000o001o002")
	cols := []lookup.Column{
		{Rows: ngram, NumRows: 4, RowBytes: rowBytes, Offset: 100},
		{Rows: other, NumRows: 3, RowBytes: rowBytes},
		{Rows: ngram, NumRows: 4, RowBytes: rowBytes, Offset: 100},
	}
	ids := []int32{
		103, 0, 100, // token 0
		101, -1, 102, // token 1
	}
	e := lookup.NewEngine(0)
	defer e.Close()

	out := []byte("........................")
	if err := lookup.Lookup(e, cols, ids, 2, 3, lookup.TokenMajor(out, 2, 3, rowBytes)); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("token-major %s\n", out)

	out = []byte("........................")
	if err := lookup.Lookup(e, cols, ids, 2, 3, lookup.HeadMajor(out, 2, 3, rowBytes)); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("head-major  %s\n", out)

	ids[4] = 3 // column 1's table has rows 0, 1, 2
	err := lookup.Lookup(e, cols, ids, 2, 3, lookup.TokenMajor(out, 2, 3, rowBytes))
	var idErr *lookup.IDError
	fmt.Println(errors.Is(err, lookup.ErrID), errors.As(err, &idErr) && idErr.T == 1 && idErr.K == 1)
	fmt.Println(err)
	// Output:
	// token-major n103o000n100n101....n102
	// head-major  n103n101o000....n100n102
	// true true
	// engram: id out of range: id 3 at (t=1, k=1): not -1 and not in [0, 0+3)
}
