package probe_test

import (
	"fmt"
	"log"
	"time"

	"github.com/scatterkit/scatterkit/tools/cmd/scatterprof/internal/probe"
	"github.com/scatterkit/scatterkit/tools/cmd/scatterprof/internal/report"
	"github.com/scatterkit/scatterkit/verbs/stage"
)

// Profile a running process for ten seconds and print the pack stage's
// median. (Needs root; not run as a test.)
func Example() {
	p, err := probe.New()
	if err != nil {
		log.Fatal(err) // not root, no BPF, no uprobes
	}
	defer p.Close()
	if _, err := p.Calibrate(20000); err != nil {
		log.Fatal(err)
	}
	const pid = 1234
	if _, err := p.Attach(pid); err != nil {
		log.Fatal(err) // gone, stripped, no markers
	}
	time.Sleep(10 * time.Second)
	var s report.Snapshot
	if err := p.Read(&s); err != nil {
		log.Fatal(err)
	}
	pack := &s.Stages[stage.Pack]
	fmt.Printf("%d chunks packed, p50 %.1f us\n", pack.Count, report.Quantile(&pack.Hist, 0.5)/1e3)
}
