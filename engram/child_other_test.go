//go:build !linux

package engram

import (
	"fmt"
	"os"
)

func runChild(mode string) int {
	fmt.Fprintf(os.Stderr, "child mode %q runs on Linux only\n", mode)
	return 2
}
