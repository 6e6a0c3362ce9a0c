package discovery_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/scatterkit/scatterkit/verbs/discovery"
)

// Environment of the child process that TestFile* tests start by running
// this test binary again.
const (
	childPathEnv = "DISCOVERY_TEST_CHILD_FILE"
	childNameEnv = "DISCOVERY_TEST_CHILD_NAME"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(childPathEnv); path != "" {
		os.Exit(childMain(path, os.Getenv(childNameEnv)))
	}
	goleak.VerifyTestMain(m)
}

// childMain publishes name in the directory file at path, says "ready
// REVISION" on stdout, then obeys stdin: "close" withdraws the record and
// says "closed"; end of input exits without withdrawing (the parent may also
// kill it at any time).
func childMain(path, name string) int {
	d, err := discovery.NewFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	reg, err := d.Publish(context.Background(), discovery.Record{
		Name: name, Transport: "shm", Addr: "/dev/shm/child-" + name,
		Attrs: map[string]string{"pid": fmt.Sprint(os.Getpid())},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	fmt.Printf("ready %d\n", reg.Record().Revision)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "close" {
			if err := reg.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "child:", err)
				return 4
			}
			fmt.Println("closed")
		}
	}
	return 0
}
