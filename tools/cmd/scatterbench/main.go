package main

import (
	"context"
	"os"

	"github.com/scatterkit/scatterkit/tools/internal/bench"
	"github.com/scatterkit/scatterkit/tools/internal/owner"
)

func main() {
	ctx := context.Background()
	if len(os.Args) > 1 && os.Args[1] == "owner" {
		// Owner mode: what -owner process and -owner netns re-execute.
		os.Exit(owner.Main(ctx, "scatterbench owner", os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == bench.EngramOwnerMode {
		// An Engram owner: what engram-remote-sharded's -owner process runs.
		os.Exit(bench.EngramOwnerMain(ctx, os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(bench.Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
