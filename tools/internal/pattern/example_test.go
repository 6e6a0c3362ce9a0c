package pattern_test

import (
	"fmt"

	"github.com/scatterkit/scatterkit/tools/internal/pattern"
)

// An owner fills its table from a seed; a requester that read row 7 of
// 264 bytes checks it against the same stream without holding the table.
func Example() {
	const seed, row = 42, 264
	table := make([]byte, 100*row)
	pattern.Fill(table, seed, 0)

	got := append([]byte(nil), table[7*row:8*row]...) // what a READ brought
	fmt.Println(pattern.Check(got, seed, 7*row))
	got[10] ^= 1
	fmt.Println(pattern.Check(got, seed, 7*row))
	// Output:
	// -1
	// 10
}
