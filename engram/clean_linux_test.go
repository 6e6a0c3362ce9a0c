//go:build linux

package engram

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/engram/snapshot"
)

// Environment of the create child.
const envChildDir = "ENGRAM_TEST_DIR" // the namespace directory

// childSpec is the table the create child writes, in chunks of
// childChunk bytes.
var childSpec = snapshot.Spec{Name: "t", NumRows: 64, RowBytes: 264}

const childChunk = 4 << 10

func runChild(mode string) int {
	if mode != "create" {
		fmt.Fprintf(os.Stderr, "unknown child mode %q\n", mode)
		return 2
	}
	// Create on the fallback path (a hidden, locked temporary file, as on
	// a file system without O_TMPFILE), from a source that stops after
	// the first chunk: it says "writing" and waits for a line on stdin.
	src := &pausingReader{rows: childRows(), in: bufio.NewReader(os.Stdin)}
	err := snapshot.CreateFrom(os.Getenv(envChildDir), childSpec, src,
		&snapshot.CreateOptions{FS: noTmpFileFS{}, ChunkBytes: childChunk})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("done")
	return 0
}

func childRows() []byte {
	b := make([]byte, childSpec.Size())
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	return b
}

// pausingReader serves rows; past the first chunk it announces "writing"
// once and blocks until stdin has a line (or ends).
type pausingReader struct {
	rows   []byte
	in     *bufio.Reader
	off    int
	paused bool
}

func (r *pausingReader) Read(p []byte) (int, error) {
	if r.off >= childChunk && !r.paused {
		r.paused = true
		fmt.Println("writing")
		if _, err := r.in.ReadString('\n'); err != nil {
			return 0, err
		}
	}
	if r.off == len(r.rows) {
		return 0, io.EOF
	}
	n := copy(p, r.rows[r.off:])
	r.off += n
	return n, nil
}

// noTmpFileFS is snapshot.OS on a file system without O_TMPFILE.
type noTmpFileFS struct{}

func (noTmpFileFS) OpenDir(path string) (snapshot.Dir, error) {
	d, err := snapshot.OS.OpenDir(path)
	if err != nil {
		return nil, err
	}
	return noTmpFileDir{d}, nil
}

type noTmpFileDir struct{ snapshot.Dir }

func (noTmpFileDir) CreateTemp(os.FileMode) (snapshot.File, error) {
	return nil, fmt.Errorf("O_TMPFILE: %w", errors.ErrUnsupported)
}

// creator is a create child stopped in the middle of its Create.
type creator struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
}

func startCreator(t *testing.T, dir string) *creator {
	t.Helper()
	c := &creator{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	c.cmd.Env = append(os.Environ(), childEnv+"=create", envChildDir+"="+dir)
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
	require.Equal(t, "writing", c.line(t), "the child is in the middle of its Create")
	return c
}

func (c *creator) line(t *testing.T) string {
	t.Helper()
	s, err := c.stdout.ReadString('\n')
	require.NoError(t, err, "child output ended")
	return strings.TrimSuffix(s, "\n")
}

// tempFiles returns the hidden temporary files in dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "."+snapshot.FileName(childSpec.Name)+".tmp-") {
			names = append(names, e.Name())
		}
	}
	return names
}

// TestOpenRemovesDeadCreatorsTempFiles kills a child process with SIGKILL
// in the middle of a Create that writes a hidden temporary file, and
// checks that the next Open of the namespace removes it, while the
// temporary file of a creator that is still alive stays and its Create
// completes.
func TestOpenRemovesDeadCreatorsTempFiles(t *testing.T) {
	tables := map[string]TableSpec{childSpec.Name: {NumRows: childSpec.NumRows, RowBytes: childSpec.RowBytes}}
	for _, tc := range []struct {
		desc string
		kill bool
	}{
		{"killed creator", true},
		{"live creator", false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "ns")
			require.NoError(t, os.Mkdir(dir, 0o755))
			c := startCreator(t, dir)
			tmp := tempFiles(t, dir)
			require.Len(t, tmp, 1, "the creator's temporary file")
			if tc.kill {
				require.NoError(t, c.cmd.Process.Kill())
				require.Error(t, c.cmd.Wait(), "killed")
				require.Equal(t, tmp, tempFiles(t, dir), "the kill leaves it behind")
			}

			s, err := Open(context.Background(), Config{Tables: tables, Namespace: "ns", Dir: root, Pin: PinNone})
			require.NoError(t, err)
			populated, err := s.Populated(childSpec.Name)
			require.NoError(t, err)
			require.False(t, populated)
			require.NoError(t, s.Close())
			if tc.kill {
				require.Empty(t, tempFiles(t, dir), "Open removed the dead creator's file")
				return
			}
			require.Equal(t, tmp, tempFiles(t, dir), "a live creator's file stays")
			_, err = io.WriteString(c.stdin, "go\n")
			require.NoError(t, err)
			require.Equal(t, "done", c.line(t))
			require.NoError(t, c.cmd.Wait())
			require.Empty(t, tempFiles(t, dir))

			s, err = Open(context.Background(), Config{Tables: tables, Namespace: "ns", Dir: root, Pin: PinNone})
			require.NoError(t, err)
			defer s.Close()
			out := make([]byte, childSpec.RowBytes)
			require.NoError(t, s.Lookup([]string{childSpec.Name}, IDs64([]int64{5}, 1, 1), TokenMajor(out, 1, 1, childSpec.RowBytes), nil))
			require.Equal(t, childRows()[5*childSpec.RowBytes:6*childSpec.RowBytes], out)
		})
	}
}
