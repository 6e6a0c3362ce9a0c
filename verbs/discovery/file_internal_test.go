//go:build linux

package discovery

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func openFile(t *testing.T) (*File, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "segments.json")
	f, err := NewFile(path, WithPollInterval(10*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f, path
}

func writeDoc(t *testing.T, path string, doc *fileDoc) {
	t.Helper()
	data, err := encodeFile(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path+".new", data, 0o644))
	require.NoError(t, os.Rename(path+".new", path))
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	require.NoError(t, cmd.Run())
	return cmd.ProcessState.Pid()
}

func TestSelfHolder(t *testing.T) {
	self, err := selfHolder()
	require.NoError(t, err)
	require.Equal(t, os.Getpid(), self.PID)
	require.NotEmpty(t, self.Boot)
	require.NotZero(t, self.Start)
	require.NotZero(t, self.PIDNS)
	require.True(t, processAlive(self, self))
	parent := self
	parent.PID = os.Getppid()
	st, err := readProcStat(parent.PID)
	require.NoError(t, err)
	parent.Start = st.start
	require.True(t, processAlive(parent, self), "the parent process is alive")
}

func TestFileStaleRecords(t *testing.T) {
	ctx := context.Background()
	f, path := openFile(t)
	self := f.self
	rec := func(name string, rev int64) Record {
		return Record{Name: name, Transport: "tcp", Addr: "127.0.0.1:1", Owner: "x", Revision: rev}
	}
	pidReused := self
	pidReused.Start++ // same pid, another process
	otherBoot := self
	otherBoot.Boot = "00000000-0000-0000-0000-000000000000"
	otherNS := self
	otherNS.PID = 1 << 22 // unlikely to exist here; unknowable there
	otherNS.PIDNS++
	exited := self
	exited.PID = deadPID(t)
	live := self
	holders := map[string]holder{"reused": pidReused, "reboot": otherBoot, "otherns": otherNS, "exited": exited, "live": live}
	doc := &fileDoc{Format: fileFormatName, Version: fileFormatVersion, Revision: 10}
	rev := int64(0)
	for name, h := range holders {
		rev++
		h.ID = formatRegID(uint64(rev) * 0x9e3779b97f4a7c15)
		doc.Records = append(doc.Records, fileRecord{Record: rec(name, rev), Holder: h})
	}
	writeDoc(t, path, doc)

	list, err := f.List(ctx, "")
	require.NoError(t, err)
	var got []string
	for _, r := range list {
		got = append(got, r.Name)
	}
	require.Equal(t, []string{"live", "otherns"}, got, "only live holders (or unknowable ones) count")
	for _, name := range []string{"reused", "reboot", "exited"} {
		_, err := f.Lookup(ctx, name)
		require.ErrorIs(t, err, ErrNotFound, name)
	}

	// A write drops the dead records and keeps the others.
	reg, err := f.Publish(ctx, Record{Name: "reused", Transport: "shm", Addr: "/dev/shm/x"})
	require.NoError(t, err)
	defer reg.Close()
	require.Equal(t, int64(11), reg.Record().Revision)
	_, err = f.Publish(ctx, Record{Name: "otherns", Transport: "shm", Addr: "/dev/shm/x"})
	require.ErrorIs(t, err, ErrExists, "a holder that cannot be checked is never taken over")
	onDisk, err := os.ReadFile(path)
	require.NoError(t, err)
	after, err := decodeFile(path, onDisk)
	require.NoError(t, err)
	got = got[:0]
	for _, fr := range after.Records {
		got = append(got, fr.Name)
	}
	require.Equal(t, []string{"live", "otherns", "reused"}, got)
}

func TestFileCorrupt(t *testing.T) {
	ctx := context.Background()
	f, path := openFile(t)
	garbage := []byte(`{"format":"scatterkit-discovery","version":1,"revision":1,"records":[{"name":"`)
	require.NoError(t, os.WriteFile(path, garbage, 0o644))

	_, err := f.Lookup(ctx, "a")
	require.ErrorIs(t, err, ErrCorrupt)
	var ce *CorruptError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, path, ce.Source)
	_, err = f.List(ctx, "")
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = f.Publish(ctx, Record{Name: "a", Transport: "tcp", Addr: "x:1"})
	require.ErrorIs(t, err, ErrCorrupt)
	seq, err := f.Watch(ctx, "")
	require.NoError(t, err)
	for _, err := range seq {
		require.ErrorIs(t, err, ErrCorrupt)
	}
	onDisk, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, garbage, onDisk, "a reader or refused writer rewrote a corrupt file")

	// Once repaired (replaced), the handle reads the new file.
	writeDoc(t, path, newFileDoc())
	_, err = f.Lookup(ctx, "a")
	require.ErrorIs(t, err, ErrNotFound)
	reg, err := f.Publish(ctx, Record{Name: "a", Transport: "tcp", Addr: "x:1"})
	require.NoError(t, err)
	require.NoError(t, reg.Close())
}

// failingTemp is a temporary file whose writes can fail or fall short.
type failingTemp struct {
	*os.File
	writeErr error
	short    bool
}

func (ft *failingTemp) Write(p []byte) (int, error) {
	if ft.writeErr != nil {
		return 0, ft.writeErr
	}
	if ft.short {
		n, err := ft.File.Write(p[:len(p)/2])
		return n, err
	}
	return ft.File.Write(p)
}

func TestFileWriteFailures(t *testing.T) {
	ctx := context.Background()
	injected := errors.New("injected I/O error")
	tests := []struct {
		name string
		ops  func(f *File) fileOps
		want error
	}{
		{"create temp", func(f *File) fileOps {
			ops := osFileOps
			ops.createTemp = func(string, string) (tempFile, error) { return nil, injected }
			return ops
		}, injected},
		{"write", func(f *File) fileOps {
			ops := osFileOps
			ops.createTemp = func(dir, pattern string) (tempFile, error) {
				tf, err := os.CreateTemp(dir, pattern)
				return &failingTemp{File: tf, writeErr: injected}, err
			}
			return ops
		}, injected},
		{"short write", func(f *File) fileOps {
			ops := osFileOps
			ops.createTemp = func(dir, pattern string) (tempFile, error) {
				tf, err := os.CreateTemp(dir, pattern)
				return &failingTemp{File: tf, short: true}, err
			}
			return ops
		}, io.ErrShortWrite},
		{"rename", func(f *File) fileOps {
			ops := osFileOps
			ops.rename = func(string, string) error { return injected }
			return ops
		}, injected},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, path := openFile(t)
			held, err := f.Publish(ctx, Record{Name: "held", Transport: "tcp", Addr: "x:1"})
			require.NoError(t, err)
			before, err := os.ReadFile(path)
			require.NoError(t, err)

			f.ops = tc.ops(f)
			_, err = f.Publish(ctx, Record{Name: "new", Transport: "tcp", Addr: "x:2"})
			require.ErrorIs(t, err, tc.want)
			require.ErrorIs(t, held.Close(), tc.want, "withdraw with failing writes")
			require.NoError(t, held.Err(), "a failed Close leaves the registration published")

			after, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, before, after, "a failed write changed the file")
			requireOnlyFiles(t, filepath.Dir(path), "segments.json", "segments.json.lock")
			_, err = f.Lookup(ctx, "new")
			require.ErrorIs(t, err, ErrNotFound)
			_, err = f.Lookup(ctx, "held")
			require.NoError(t, err)
			f.mu.Lock()
			require.Len(t, f.regs, 1, "a failed Publish left a registration")
			f.mu.Unlock()

			// With working I/O again, Close can be retried and the name reused.
			f.ops = osFileOps
			require.NoError(t, held.Close())
			require.ErrorIs(t, held.Err(), ErrWithdrawn)
			reg, err := f.Publish(ctx, Record{Name: "new", Transport: "tcp", Addr: "x:2"})
			require.NoError(t, err)
			require.NoError(t, reg.Close())
		})
	}
}

func requireOnlyFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	require.ElementsMatch(t, names, got)
}

func TestFileLockWaitsForContext(t *testing.T) {
	f, path := openFile(t)
	unlock, err := lockFile(context.Background(), path+".lock")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err = f.Publish(ctx, Record{Name: "a", Transport: "tcp", Addr: "x:1"})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = os.Stat(path)
	require.ErrorIs(t, err, fs.ErrNotExist, "nothing written while the lock was held elsewhere")

	// Readers take no lock.
	_, err = f.Lookup(context.Background(), "a")
	require.ErrorIs(t, err, ErrNotFound)

	done := make(chan error, 1)
	go func() {
		reg, err := f.Publish(context.Background(), Record{Name: "a", Transport: "tcp", Addr: "x:1"})
		if err == nil {
			err = reg.Close()
		}
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	unlock()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Publish did not proceed after the lock was released")
	}
}

func TestFileCacheFollowsReplacement(t *testing.T) {
	ctx := context.Background()
	f, path := openFile(t)
	other, err := NewFile(path)
	require.NoError(t, err)
	defer other.Close()
	for i := range 20 {
		// Quick successive replacements of the same size must all be seen.
		name := string(rune('a' + i))
		reg, err := other.Publish(ctx, Record{Name: name, Transport: "tcp", Addr: "x:1"})
		require.NoError(t, err)
		_, err = f.Lookup(ctx, name)
		require.NoError(t, err, "step %d", i)
		require.NoError(t, reg.Close())
		_, err = f.Lookup(ctx, name)
		require.ErrorIs(t, err, ErrNotFound, "step %d", i)
	}
}
