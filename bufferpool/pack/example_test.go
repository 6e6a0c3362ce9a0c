package pack_test

import (
	"fmt"

	"github.com/scatterkit/scatterkit/bufferpool/pack"
)

// A table of five 4-byte rows; row r holds the bytes 'a'+r.
func exampleTable() []byte {
	table := make([]byte, 5*4)
	for i := range table {
		table[i] = 'a' + byte(i/4)
	}
	return table
}

func ExampleGather() {
	table := exampleTable()
	dst := []byte("............")
	// Ids are global: this table holds rows 100..104. Id -1 leaves its
	// packed row untouched.
	ids := []int32{104, -1, 101}
	err := pack.Gather(dst, table, ids, pack.Layout{Rows: 3, RowBytes: 4, Bias: 100})
	fmt.Println(string(dst), err)

	// Nothing is written when any id is bad.
	err = pack.Gather(dst, table, []int32{100, 105}, pack.Layout{Rows: 2, RowBytes: 4, Bias: 100})
	fmt.Println(string(dst), err)
	// Output:
	// eeee....bbbb <nil>
	// eeee....bbbb id 105 at index 1: row outside the table: pack: out of bounds
}

func ExampleGatherGrid() {
	table := exampleTable()
	// Two tokens, two ids each.
	ids := []int64{
		0, 1, // token 0
		2, 3, // token 1
	}
	tokenMajor := make([]byte, 2*2*4)
	headMajor := make([]byte, 2*2*4)
	fmt.Println(pack.GatherGrid(tokenMajor, table, ids, pack.TokenMajor(2, 2, 4)))
	fmt.Println(pack.GatherGrid(headMajor, table, ids, pack.HeadMajor(2, 2, 4)))
	fmt.Println(string(tokenMajor))
	fmt.Println(string(headMajor))
	// Output:
	// <nil>
	// <nil>
	// aaaabbbbccccdddd
	// aaaaccccbbbbdddd
}

func ExampleScatter() {
	table := exampleTable()
	packed := []byte("WXYZwxyz")
	err := pack.Scatter(table, packed, []int64{3, 0}, pack.Layout{Rows: 2, RowBytes: 4})
	fmt.Println(string(table), err)
	// Output:
	// wxyzbbbbccccWXYZeeee <nil>
}

func ExampleParallelGather() {
	w := pack.NewWorkers(2)
	defer w.Close()

	const rows, rowBytes = 4096, 264
	table := make([]byte, 8192*rowBytes)
	for i := range table {
		table[i] = byte(i/rowBytes) | 1
	}
	ids := make([]int32, rows)
	for i := range ids {
		ids[i] = int32(i*7) % 8192
	}
	staging := make([]byte, rows*rowBytes)
	err := pack.ParallelGather(w, staging, table, ids, pack.Layout{Rows: rows, RowBytes: rowBytes})
	fmt.Println(err, staging[0], staging[rowBytes], staging[(rows-1)*rowBytes])
	// Output:
	// <nil> 1 7 249
}
