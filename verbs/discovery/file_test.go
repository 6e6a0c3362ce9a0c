//go:build linux

package discovery_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs/discovery"
	"github.com/scatterkit/scatterkit/verbs/discovery/discoverytest"
)

const testPoll = 10 * time.Millisecond

func newFile(t *testing.T, path string) *discovery.File {
	t.Helper()
	f, err := discovery.NewFile(path, discovery.WithPollInterval(testPoll))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

func TestFileConformance(t *testing.T) {
	discoverytest.Run(t, discoverytest.Backend{
		New: func(t *testing.T) discovery.Directory {
			return newFile(t, filepath.Join(t.TempDir(), "segments.json"))
		},
		Reopen: func(t *testing.T, d discovery.Directory) discovery.Directory {
			return newFile(t, d.(*discovery.File).Path())
		},
	})
}

func TestNewFileErrors(t *testing.T) {
	_, err := discovery.NewFile("")
	require.Error(t, err)
	_, err = discovery.NewFile(filepath.Join(t.TempDir(), "missing", "segments.json"))
	require.ErrorIs(t, err, os.ErrNotExist)
	notDir := filepath.Join(t.TempDir(), "plain")
	require.NoError(t, os.WriteFile(notDir, []byte("x"), 0o644))
	_, err = discovery.NewFile(filepath.Join(notDir, "segments.json"))
	require.Error(t, err)
}

// child is this test binary run again as a process that publishes one name
// in a directory file (see childMain).
type child struct {
	cmd   *exec.Cmd
	stdin interface {
		Write([]byte) (int, error)
		Close() error
	}
	out *bufio.Scanner
	rev int64
}

func startChild(t *testing.T, path, name string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childPathEnv+"="+path, childNameEnv+"="+name)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	})
	line := c.line(t)
	rev, ok := strings.CutPrefix(line, "ready ")
	require.True(t, ok, "child said %q", line)
	c.rev, err = strconv.ParseInt(rev, 10, 64)
	require.NoError(t, err)
	return c
}

func (c *child) line(t *testing.T) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		if c.out.Scan() {
			got <- c.out.Text()
		}
		close(got)
	}()
	select {
	case s, ok := <-got:
		require.True(t, ok, "child closed its output")
		return s
	case <-time.After(20 * time.Second):
		t.Fatal("child said nothing in 20 s")
	}
	return ""
}

func TestFileTwoProcesses(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "segments.json")
	c := startChild(t, path, "engram/child")
	d := newFile(t, path)

	got, err := d.Lookup(ctx, "engram/child")
	require.NoError(t, err)
	require.Equal(t, c.rev, got.Revision)
	require.Equal(t, strconv.Itoa(c.cmd.Process.Pid), got.Attrs["pid"])
	require.True(t, strings.HasSuffix(got.Owner, "/"+strconv.Itoa(c.cmd.Process.Pid)), "owner %q", got.Owner)

	// The child is alive: its name cannot be taken.
	_, err = d.Publish(ctx, discovery.Record{Name: "engram/child", Transport: "tcp", Addr: "127.0.0.1:1"})
	var ee *discovery.ExistsError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, c.rev, ee.Holder.Revision)

	// Both processes' records are visible side by side.
	mine, err := d.Publish(ctx, discovery.Record{Name: "engram/parent", Transport: "tcp", Addr: "127.0.0.1:2"})
	require.NoError(t, err)
	defer mine.Close()
	list, err := d.List(ctx, "engram/")
	require.NoError(t, err)
	require.Len(t, list, 2)

	// A graceful withdrawal in the child shows up here.
	w := watchEvents(t, d, "engram/child")
	requireEvent(t, w, discovery.EventPut, "engram/child")
	_, err = c.stdin.Write([]byte("close\n"))
	require.NoError(t, err)
	require.Equal(t, "closed", c.line(t))
	_, err = d.Lookup(ctx, "engram/child")
	require.ErrorIs(t, err, discovery.ErrNotFound)
	requireEvent(t, w, discovery.EventDelete, "engram/child")
	require.NoError(t, c.stdin.Close())
	require.NoError(t, c.cmd.Wait())
}

func TestFileChildKilled(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "segments.json")
	c := startChild(t, path, "seg")
	d := newFile(t, path)
	w := watchEvents(t, d, "")
	requireEvent(t, w, discovery.EventPut, "seg")
	_, err := d.Publish(ctx, discovery.Record{Name: "seg", Transport: "tcp", Addr: "127.0.0.1:1"})
	require.ErrorIs(t, err, discovery.ErrExists)

	require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
	// Until it is reaped the child is a zombie, already dead to the directory.
	require.Eventually(t, func() bool {
		_, err := d.Lookup(ctx, "seg")
		return err != nil
	}, 10*time.Second, time.Millisecond)
	_, err = d.Lookup(ctx, "seg")
	require.ErrorIs(t, err, discovery.ErrNotFound)
	requireEvent(t, w, discovery.EventDelete, "seg")
	require.Error(t, c.cmd.Wait(), "killed child exits with an error")
	_, err = d.Lookup(ctx, "seg")
	require.ErrorIs(t, err, discovery.ErrNotFound)

	// Its record is still in the file until the next write, which drops it.
	require.Contains(t, fileNames(t, path), "seg")
	reg, err := d.Publish(ctx, discovery.Record{Name: "seg", Transport: "tcp", Addr: "127.0.0.1:1"})
	require.NoError(t, err)
	defer reg.Close()
	require.Greater(t, reg.Record().Revision, c.rev)
	requireEvent(t, w, discovery.EventPut, "seg")
	require.Equal(t, []string{"seg"}, fileNames(t, path))
	got, err := d.Lookup(ctx, "seg")
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:1", got.Addr)
}

// fileNames reads the directory file directly and returns the names in it.
func fileNames(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc struct {
		Records []struct {
			Name string `json:"name"`
		} `json:"records"`
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	var out []string
	for _, r := range doc.Records {
		out = append(out, r.Name)
	}
	return out
}

type eventOrErr struct {
	ev  discovery.Event
	err error
}

func watchEvents(t *testing.T, d discovery.Directory, prefix string) <-chan eventOrErr {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	seq, err := d.Watch(ctx, prefix)
	require.NoError(t, err)
	ch := make(chan eventOrErr, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range seq {
			select {
			case ch <- eventOrErr{ev, err}:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ch
}

func requireEvent(t *testing.T, ch <-chan eventOrErr, kind discovery.EventKind, name string) {
	t.Helper()
	select {
	case it := <-ch:
		require.NoError(t, it.err)
		require.Equal(t, kind, it.ev.Kind, "event for %q", it.ev.Record.Name)
		require.Equal(t, name, it.ev.Record.Name)
	case <-time.After(10 * time.Second):
		t.Fatal(fmt.Sprintf("no %v event for %q in 10 s", kind, name))
	}
}
