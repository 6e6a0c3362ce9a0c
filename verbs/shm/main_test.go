package shm_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/shm"
)

// childAddr, when set, makes the test binary a requester that connects
// to that segment and reports the outcome (TestAdmitOtherUser runs it as
// another user).
const childAddr = "SHM_TEST_CONNECT_ADDR"

func TestMain(m *testing.M) {
	if addr := os.Getenv(childAddr); addr != "" {
		os.Exit(connectChild(addr))
	}
	goleak.VerifyTestMain(m)
}

// connectChild connects to addr and prints what happened: "admitted",
// "not admitted: ..." or "error: ...".
func connectChild(addr string) int {
	tr := shm.New(shm.Config{})
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := tr.Connect(ctx, addr, verbs.ConnectOptions{})
	switch {
	case err == nil:
		fmt.Println("admitted")
		_ = c.Close()
	case errors.Is(err, verbs.ErrNotAdmitted):
		fmt.Println("not admitted:", err)
	default:
		fmt.Println("error:", err)
	}
	return 0
}
