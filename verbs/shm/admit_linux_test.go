//go:build linux

package shm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"
)

// admitFixture serves a read-write and a read-only export under policy
// and returns the segment's address and the reported errors.
func admitFixture(t *testing.T, addr string, policy verbs.AdmitFunc) (verbs.Segment, chan error) {
	t.Helper()
	owner := New(Config{})
	t.Cleanup(func() { require.NoError(t, owner.Close()) })
	rw, err := owner.Alloc(8192, verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	ro, err := owner.Alloc(4096, verbs.AccessRemoteRead)
	require.NoError(t, err)
	errs := make(chan error, 16)
	seg, err := owner.Listen(addr, []verbs.Export{{Name: "rw", Region: rw}, {Name: "ro", Region: ro}}, verbs.ListenOptions{
		Admit: policy,
		OnError: func(err error) {
			select {
			case errs <- err:
			default:
			}
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, seg.Close()) })
	return seg, errs
}

// TestAdmit: the policy sees the peer's kernel credentials; a refused
// peer's Connect fails with ErrNotAdmitted and the owner reports an
// *AdmitError; a peer admitted read-only is not given the export it may
// not write; the default admits this process's own user.
func TestAdmit(t *testing.T) {
	req := New(Config{})
	defer req.Close()
	connect := func(addr string) (verbs.Conn, error) {
		return req.Connect(verbstest.Context(t), addr, verbs.ConnectOptions{})
	}
	t.Run("credentials", func(t *testing.T) {
		var got verbs.PeerIdentity
		seg, _ := admitFixture(t, rawAddr("admit-cred"), func(id verbs.PeerIdentity) (verbs.Access, error) {
			got = id
			return verbs.AccessRemoteRead | verbs.AccessRemoteWrite, nil
		})
		c, err := connect(seg.Addr())
		require.NoError(t, err)
		defer c.Close()
		require.Equal(t, "shm", got.Transport)
		require.NotNil(t, got.Cred)
		require.Equal(t, verbs.PeerCred{PID: int32(os.Getpid()), UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}, *got.Cred)
		require.Len(t, c.Remote(), 2)
	})
	t.Run("refused", func(t *testing.T) {
		seg, errs := admitFixture(t, rawAddr("admit-refused"), verbs.UIDPolicy{Write: []uint32{uint32(os.Geteuid()) + 1}}.Admit)
		_, err := connect(seg.Addr())
		require.ErrorIs(t, err, verbs.ErrNotAdmitted)
		reported := <-errs
		var ae *verbs.AdmitError
		require.ErrorAs(t, reported, &ae)
		require.ErrorIs(t, reported, verbs.ErrNotAdmitted)
		require.Contains(t, reported.Error(), "is not allowed")
	})
	t.Run("read-only", func(t *testing.T) {
		seg, _ := admitFixture(t, rawAddr("admit-ro"), verbs.UIDPolicy{Read: []uint32{uint32(os.Geteuid())}}.Admit)
		c, err := connect(seg.Addr())
		require.NoError(t, err)
		defer c.Close()
		names := []string{}
		for _, ri := range c.Remote() {
			names = append(names, ri.Name)
			require.Equal(t, verbs.AccessRemoteRead, ri.Access)
		}
		require.Equal(t, []string{"ro"}, names, "a read-only peer was given the writable export")
	})
	t.Run("default-own-user", func(t *testing.T) {
		seg, _ := admitFixture(t, rawAddr("admit-default"), nil)
		c, err := connect(seg.Addr())
		require.NoError(t, err)
		require.NoError(t, c.Close())
	})
}

// TestSocketMode: a segment's socket file admits only the owner's user
// by default.
func TestSocketMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg.sock")
	admitFixture(t, path, nil)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
}

// TestAdmitOtherUser runs a requester as another user (nobody) against
// a segment with the default policy, on an abstract socket (no file
// permissions): it is refused. With a policy that admits it read-only it
// connects. Needs root to change user.
func TestAdmitOtherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a requester as another user")
	}
	const nobody = 65534
	// A copy of the test binary that nobody may run.
	dir, err := os.MkdirTemp("", "shm-admit-")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "shm.test")
	self, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, self, 0o755))
	run := func(addr string) string {
		t.Helper()
		cmd := exec.Command(bin, "-test.run=^$")
		cmd.Env = append(os.Environ(), "SHM_TEST_CONNECT_ADDR="+addr) // main_test.go: childAddr
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Run(), "child: %s", out.String())
		return strings.TrimSpace(out.String())
	}
	seg, _ := admitFixture(t, rawAddr("admit-nobody"), nil)
	require.True(t, strings.HasPrefix(run(seg.Addr()), "not admitted:"), "default policy admitted another user")
	seg, _ = admitFixture(t, rawAddr("admit-nobody-ro"), verbs.UIDPolicy{Write: []uint32{0}, Read: []uint32{nobody}}.Admit)
	require.Equal(t, "admitted", run(seg.Addr()))
}
