package bench_test

import (
	"fmt"
	"log"
	"math/rand/v2"

	"github.com/scatterkit/scatterkit/planfmt"
	"github.com/scatterkit/scatterkit/tools/internal/bench"
)

// The named workloads lower to plans over the owner's table.
func ExampleExpand() {
	ws, err := bench.Expand("many-small,mixed")
	if err != nil {
		log.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, w := range ws {
		p, err := w.Plan(r, 1<<30)
		if err != nil {
			log.Fatal(err)
		}
		var n planfmt.Normalized
		if err := planfmt.Normalize(&n, p); err != nil {
			log.Fatal(err)
		}
		g := n.Summary()
		fmt.Printf("%s: %v plan, %d fragments, %d bytes\n", w.Name, p.Form, g.Fragments, g.Bytes)
	}
	// Output:
	// many-small: rows plan, 98304 fragments, 25952256 bytes
	// mixed: ranges plan, 32832 fragments, 42205184 bytes
}
