package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/engram"
	"github.com/scatterkit/scatterkit/tools/internal/dirspec"
	"github.com/scatterkit/scatterkit/tools/internal/pattern"
	"github.com/scatterkit/scatterkit/verbs/discovery/etcd/etcdtest"
	"github.com/scatterkit/scatterkit/verbs/tcp"
)

// serveChild is an engramctl serve in a child process (the test binary
// in serveChildEnv mode).
type serveChild struct {
	cmd    *exec.Cmd
	addr   string
	exited chan struct{}
	err    error
	stderr strings.Builder
}

func startServeChild(t *testing.T, args ...string) *serveChild {
	t.Helper()
	c := &serveChild{cmd: exec.Command(os.Args[0], "-test.run=^$"), exited: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), serveChildEnv+"="+strings.Join(append([]string{"serve"}, args...), "\t"))
	var mu sync.Mutex
	c.cmd.Stderr = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return c.stderr.Write(p) })
	out, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, c.cmd.Start())
	lines := bufio.NewScanner(out)
	ready := make(chan error, 1)
	go func() {
		var ev struct{ Event, Addr string }
		if !lines.Scan() {
			ready <- fmt.Errorf("no ready line: %v", lines.Err())
		} else if err := json.Unmarshal(lines.Bytes(), &ev); err != nil || ev.Event != "ready" {
			ready <- fmt.Errorf("ready line %q: %v", lines.Text(), err)
		} else {
			c.addr = ev.Addr
			ready <- nil
		}
		for lines.Scan() {
		}
		c.err = c.cmd.Wait()
		close(c.exited)
	}()
	select {
	case err := <-ready:
		mu.Lock()
		require.NoError(t, err, c.stderr.String())
		mu.Unlock()
	case <-time.After(30 * time.Second):
		t.Fatal("no ready line within 30 s")
	}
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.exited
	})
	return c
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestClusterEtcd: a table of 1,200 rows cut into three shards over three
// engramctl serve processes, every shard on two of them, the owners found
// through a real etcd server (embedded, loopback; records on one-second
// leases). A remote store opened by namespace from etcd alone reads the
// whole table's rows; an owner killed (SIGKILL) while lookups run changes
// nothing the caller sees (its shards' replicas serve, bytes checked);
// with a second owner killed, the shard both held fails every lookup
// touching it whole, with an error naming the shard, while lookups of the
// other shards still succeed; the killed owners' records expire with
// their leases; the last owner stops cleanly (no leaked lease) and
// withdraws its records.
func TestClusterEtcd(t *testing.T) {
	srv, err := etcdtest.Start()
	require.NoError(t, err)
	defer srv.Close()
	uri := srv.URI("/engram-test/", "ttl=1s")

	const R, rows, seed = 264, 1200, 23
	shard := []string{"a.s0:400:264:a@0", "a.s1:400:264:a@400", "a.s2:400:264:a@800"}
	held := [][2]int{{0, 1}, {1, 2}, {2, 0}} // owner i holds these shards
	owners := make([]*serveChild, 3)
	dirs := make([]string, 3)
	for i, h := range held {
		dir := t.TempDir()
		dirs[i] = dir
		for _, c := range [][]string{
			{"create", "-dir", dir, "-ns", "cl", "-table", shard[h[0]], "-table", shard[h[1]]},
			{"populate", "-dir", dir, "-ns", "cl", "-table", fmt.Sprintf("a.s%d", h[0]), "-gen", fmt.Sprint(seed)},
			{"populate", "-dir", dir, "-ns", "cl", "-table", fmt.Sprintf("a.s%d", h[1]), "-gen", fmt.Sprint(seed)},
		} {
			_, errs, code := ctl(t, c...)
			require.Equal(t, 0, code, "%v: %s", c, errs)
		}
		owners[i] = startServeChild(t, "-dir", dir, "-ns", "cl", "-discovery", uri)
	}
	whole := make([]byte, rows*R)
	pattern.Fill(whole, seed, 0)
	out, errs, code := ctl(t, "inspect", "-dir", dirs[2], "-ns", "cl", "-discovery", uri)
	require.Equal(t, 0, code, errs)
	require.Contains(t, out, "6 record(s)")

	d, err := dirspec.Open(t.Context(), uri)
	require.NoError(t, err)
	defer d.Close()
	tr := tcp.New(tcp.Config{})
	defer tr.Close()
	rs, err := engram.Open(t.Context(), engram.Config{Tables: map[string]engram.TableSpec{"a": {NumRows: rows, RowBytes: R}},
		Namespace: "cl", Remote: &engram.RemoteConfig{Transport: tr, Directory: d, BufferBytes: 8 << 20}})
	require.NoError(t, err)
	defer func() { require.NoError(t, rs.Close()) }()

	const T, K = 64, 6
	names := []string{"a", "a", "a", "a", "a", "a"}
	lookup := func(r *rand.Rand, lo, hi int64) error {
		ids := make([]int64, T*K)
		for i := range ids {
			ids[i] = lo + r.Int64N(hi-lo)
		}
		buf, err := rs.NewBuffer(T * K * R)
		if err != nil {
			return err
		}
		defer buf.Release()
		if err := rs.Lookup(names, engram.IDs64(ids, T, K), engram.TokenMajor(buf.Bytes(), T, K, R), nil); err != nil {
			return err
		}
		for i, id := range ids {
			if string(whole[id*R:(id+1)*R]) != string(buf.Bytes()[i*R:(i+1)*R]) {
				return fmt.Errorf("row %d (id %d): wrong bytes", i, id)
			}
		}
		return nil
	}
	r := rand.New(rand.NewPCG(seed, 1))
	require.NoError(t, lookup(r, 0, rows))

	// Owner 0 (shards 0 and 1) killed while lookups of the whole table run.
	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		done    atomic.Int64
		lookErr = make(chan error, 2)
	)
	for g := range 2 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(10+g)))
			for !stop.Load() {
				if err := lookup(r, 0, rows); err != nil {
					lookErr <- err
					return
				}
				done.Add(1)
			}
		})
	}
	for done.Load() < 20 && len(lookErr) == 0 {
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, owners[0].cmd.Process.Signal(syscall.SIGKILL))
	<-owners[0].exited
	at := done.Load()
	for done.Load() < at+50 && len(lookErr) == 0 {
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	close(lookErr)
	for err := range lookErr {
		require.NoError(t, err, "a lookup while owner 0 was killed (every shard has a live replica)")
	}
	t.Logf("%d lookups checked, %d after the kill", done.Load(), done.Load()-at)

	// Owner 1 (shards 1 and 2) killed too: shard 1 has no replica left.
	require.NoError(t, owners[1].cmd.Process.Signal(syscall.SIGKILL))
	<-owners[1].exited
	err = lookup(r, 400, 800)
	var se *engram.ShardError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "a", se.Table)
	require.Equal(t, [2]int64{400, 800}, [2]int64{se.Lo, se.Hi})
	require.Contains(t, err.Error(), "rows [400, 800)")
	require.NoError(t, lookup(r, 0, 400), "shard 0 is on owner 2")
	require.NoError(t, lookup(r, 800, 1200), "shard 2 is on owner 2")

	// The killed owners' records expire with their leases.
	require.Eventually(t, func() bool {
		out, _, code := ctl(t, "inspect", "-dir", dirs[2], "-ns", "cl", "-discovery", uri)
		return code == 0 && strings.Contains(out, "2 record(s)")
	}, 10*time.Second, 50*time.Millisecond)
	// A store opened now finds no owner of rows [400, 800).
	_, err = engram.Open(t.Context(), engram.Config{Tables: map[string]engram.TableSpec{"a": {NumRows: rows, RowBytes: R}},
		Namespace: "cl", Remote: &engram.RemoteConfig{Transport: tr, Directory: d}})
	require.ErrorIs(t, err, engram.ErrConfig)
	require.Contains(t, err.Error(), `the directory's records under "engram/cl/"`)
	require.Contains(t, err.Error(), "rows [400, 800)")

	require.NoError(t, owners[2].cmd.Process.Signal(syscall.SIGTERM))
	<-owners[2].exited
	require.NoError(t, owners[2].err, owners[2].stderr.String())
	out, _, _ = ctl(t, "inspect", "-dir", dirs[2], "-ns", "cl", "-discovery", uri)
	require.Contains(t, out, "0 record(s)", "the stopped owner withdrew its records")
}
