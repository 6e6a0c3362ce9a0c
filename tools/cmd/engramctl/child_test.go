package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// childEnv makes the test binary run engramctl with the arguments in
// childArgsEnv (tab-separated), pausing inside the manifest write: it says
// "writing" and waits for a line on stdin.
const (
	childEnv     = "ENGRAMCTL_TEST_CHILD"
	childArgsEnv = "ENGRAMCTL_TEST_ARGS"
)

// serveChildEnv makes the test binary run engramctl with the arguments it
// holds (tab-separated), without pausing: the owner processes of
// cluster_test.go.
const serveChildEnv = "ENGRAMCTL_TEST_SERVE"

func TestMain(m *testing.M) {
	if args := os.Getenv(serveChildEnv); args != "" {
		os.Exit(run(context.Background(), strings.Split(args, "\t"), os.Stdout, os.Stderr))
	}
	if os.Getenv(childEnv) != "" {
		in := bufio.NewReader(os.Stdin)
		manifestWritten = func() {
			fmt.Println("writing")
			_, _ = in.ReadString('\n')
		}
		os.Exit(run(context.Background(), strings.Split(os.Getenv(childArgsEnv), "\t"), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// pausedCreate is an engramctl create child stopped in its manifest write.
type pausedCreate struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
}

func startPausedCreate(t *testing.T, args ...string) *pausedCreate {
	t.Helper()
	c := &pausedCreate{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	c.cmd.Env = append(os.Environ(), childEnv+"=1", childArgsEnv+"="+strings.Join(args, "\t"))
	c.cmd.Stderr = os.Stderr
	var err error
	c.stdin, err = c.cmd.StdinPipe()
	require.NoError(t, err)
	out, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	c.stdout = bufio.NewReader(out)
	require.NoError(t, c.cmd.Start())
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil { // not waited for: the test failed
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	})
	line, err := c.stdout.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "writing\n", line, "the child is in the middle of its manifest write")
	return c
}

// strays returns the names in the namespace directory other than the
// manifest and table files.
func strays(t *testing.T, nsDir string) []string {
	t.Helper()
	ents, err := os.ReadDir(nsDir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		if e.Name() != manifestName && !strings.HasSuffix(e.Name(), ".engram") {
			names = append(names, e.Name())
		}
	}
	return names
}

// TestKilledCreateLeavesNoTempFile kills an engramctl create with SIGKILL
// while it writes the manifest and checks that the next command on the
// namespace removes the temporary file it left, while a live create's
// temporary file stays and its declaration lands.
func TestKilledCreateLeavesNoTempFile(t *testing.T) {
	for _, tc := range []struct {
		desc string
		kill bool
	}{
		{"killed create", true},
		{"live create", false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			nsDir := filepath.Join(dir, "m")
			_, errs, code := ctl(t, "create", "-dir", dir, "-ns", "m", "-table", "a:10:64")
			require.Equal(t, 0, code, errs)
			c := startPausedCreate(t, "create", "-dir", dir, "-ns", "m", "-table", "b:20:64")
			tmp := strays(t, nsDir)
			require.Len(t, tmp, 1, "the child's temporary manifest")
			if tc.kill {
				require.NoError(t, c.cmd.Process.Kill())
				require.Error(t, c.cmd.Wait(), "killed")
				require.Equal(t, tmp, strays(t, nsDir), "the kill leaves it behind")
			}

			out, errs, code := ctl(t, "inspect", "-dir", dir, "-ns", "m")
			require.Equal(t, 0, code, errs)
			require.Contains(t, out, "  a   ")
			if tc.kill {
				require.NotContains(t, out, "  b   ", "the killed create declared nothing")
				require.Empty(t, strays(t, nsDir), "the next command removed the dead create's file")
				return
			}
			require.Equal(t, tmp, strays(t, nsDir), "a live create's file stays")
			_, err := io.WriteString(c.stdin, "go\n")
			require.NoError(t, err)
			require.NoError(t, c.cmd.Wait())
			require.Empty(t, strays(t, nsDir))
			out, errs, code = ctl(t, "inspect", "-dir", dir, "-ns", "m")
			require.Equal(t, 0, code, errs)
			require.Contains(t, out, "  b   ")
		})
	}
}
