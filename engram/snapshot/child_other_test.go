//go:build !linux

package snapshot

import (
	"fmt"
	"os"
)

func runChild(mode string) int {
	fmt.Fprintf(os.Stderr, "child mode %q needs Linux\n", mode)
	return 2
}
