package main

import (
	"context"
	"os"

	"github.com/scatterkit/scatterkit/tools/internal/owner"
)

func main() {
	os.Exit(owner.Main(context.Background(), "scatterd", os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
