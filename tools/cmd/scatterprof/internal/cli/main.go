package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
)

// Main runs the command with its arguments (without the program name) and
// returns the exit status: 0, 1 when the profile could not run, 2 for a
// bad command line, or the profiled command's own status.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "bench" {
		return runBench(ctx, args[1:], stdout, stderr)
	}
	c, err := Parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	return runProfile(ctx, c, stdout, stderr)
}
