//go:build linux

package shm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"
)

// fixture is a segment with a read-write and a read-only export, an error
// log and a healthy connection that must survive the raw peers.
type fixture struct {
	owner, req *Transport
	seg        verbs.Segment
	rw, ro     *verbs.Region
	errs       chan error
	good       verbs.Conn
	addr       string
}

var rawAddrs atomic.Uint64

func rawAddr(kind string) string {
	return fmt.Sprintf("@scatterkit-%s-%d-%d", kind, os.Getpid(), rawAddrs.Add(1))
}

func newFixture(t *testing.T) *fixture {
	r := verbstest.NewRand(t)
	f := &fixture{owner: New(Config{}), req: New(Config{}), errs: make(chan error, 64)}
	t.Cleanup(func() { require.NoError(t, f.req.Close()) })
	t.Cleanup(func() { require.NoError(t, f.owner.Close()) })
	var err error
	f.rw, err = f.owner.Alloc(64<<10, verbs.AccessRemoteRead|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	f.ro, err = f.owner.Alloc(8192, verbs.AccessRemoteRead)
	require.NoError(t, err)
	verbstest.Fill(r, f.rw.Bytes())
	verbstest.Fill(r, f.ro.Bytes())
	f.addr = rawAddr("raw")
	f.seg, err = f.owner.Listen(f.addr, []verbs.Export{{Name: "rw", Region: f.rw}, {Name: "ro", Region: f.ro}}, verbs.ListenOptions{
		OnError: verbstest.ErrorLog(f.errs),
	})
	require.NoError(t, err)
	f.good, err = f.req.Connect(verbstest.Context(t), f.addr, verbs.ConnectOptions{})
	require.NoError(t, err)
	return f
}

func (f *fixture) requireHealthy(t *testing.T) {
	t.Helper()
	verbstest.RequireReads(t, f.req, f.good, f.ro, 100)
}

func (f *fixture) requireReported(t *testing.T, stage, reason string) {
	t.Helper()
	select {
	case err := <-f.errs:
		var pe *verbs.ProtocolError
		require.ErrorAs(t, err, &pe, "reported: %v", err)
		require.Equal(t, stage, pe.Stage)
		require.Contains(t, pe.Reason, reason)
	case <-time.After(10 * time.Second):
		t.Fatal("nothing reported")
	}
}

func dial(t *testing.T, addr string) *net.UnixConn {
	t.Helper()
	raw, err := net.Dial("unix", addr)
	require.NoError(t, err)
	nc := raw.(*net.UnixConn)
	t.Cleanup(func() { nc.Close() })
	require.NoError(t, nc.SetDeadline(time.Now().Add(10*time.Second)))
	return nc
}

// testMemfd makes a memfd of size bytes with the given seals.
func testMemfd(t *testing.T, size int, seal bool) int {
	t.Helper()
	flags := unix.MFD_CLOEXEC
	if seal {
		flags |= unix.MFD_ALLOW_SEALING
	}
	fd, err := unix.MemfdCreate("test", flags)
	require.NoError(t, err)
	t.Cleanup(func() { unix.Close(fd) })
	require.NoError(t, unix.Ftruncate(fd, int64(size)))
	if seal {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
		require.NoError(t, err)
	}
	return fd
}

func sendHello(t *testing.T, nc *net.UnixConn, regions []verbs.RegionInfo, fds []int) {
	t.Helper()
	h := frame.Hello{Lanes: 1, QueueDepth: 8, Regions: regions}
	out := frame.Append(nil, &frame.Header{Type: frame.TypeHello, Len: uint32(frame.HelloSize(&h))})
	require.NoError(t, sendMsg(nc, frame.AppendHello(out, &h), fds))
}

func requireClosed(t *testing.T, nc *net.UnixConn) {
	t.Helper()
	var b [64]byte
	for {
		_, err := nc.Read(b[:])
		if err != nil {
			require.False(t, errors.Is(err, context.DeadlineExceeded), "the owner kept the connection open")
			return
		}
	}
}

// TestOwnerRejectsBadHandshakes sends handshakes whose descriptors or
// frames are wrong: each is refused with a *ProtocolError, nothing is
// mapped, and the healthy connection goes on.
func TestOwnerRejectsBadHandshakes(t *testing.T) {
	f := newFixture(t)
	region := func(size uint64) []verbs.RegionInfo {
		return []verbs.RegionInfo{{Name: "x", Key: 5, Len: size, Access: verbs.AccessRemoteRead | verbs.AccessRemoteWrite}}
	}
	var p [2]int
	require.NoError(t, unix.Pipe2(p[:], unix.O_CLOEXEC))
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	for _, tc := range []struct {
		name, stage, reason string
		run                 func(nc *net.UnixConn)
	}{
		{"garbage", "handshake", "", func(nc *net.UnixConn) {
			_, err := nc.Write(bytes.Repeat([]byte{0xee}, 100))
			require.NoError(t, err)
		}},
		{"unsealed-memfd", "handshake", "not sealed", func(nc *net.UnixConn) {
			sendHello(t, nc, region(4096), []int{testMemfd(t, 4096, false)})
		}},
		{"short-memfd", "handshake", "file of 4096 bytes", func(nc *net.UnixConn) {
			sendHello(t, nc, region(8192), []int{testMemfd(t, 4096, true)})
		}},
		{"pipe", "handshake", "not a regular file", func(nc *net.UnixConn) {
			sendHello(t, nc, region(4096), []int{p[0]})
		}},
		{"missing-descriptor", "handshake", "descriptors for", func(nc *net.UnixConn) {
			sendHello(t, nc, region(4096), nil)
		}},
		{"extra-descriptor", "handshake", "descriptors for", func(nc *net.UnixConn) {
			sendHello(t, nc, nil, []int{testMemfd(t, 4096, true)})
		}},
		{"read-only-descriptor-for-writable-region", "handshake", "mmap", func(nc *net.UnixConn) {
			fd := testMemfd(t, 4096, true)
			ro, err := unix.Open("/proc/self/fd/"+itoa(fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			require.NoError(t, err)
			t.Cleanup(func() { unix.Close(ro) })
			sendHello(t, nc, region(4096), []int{ro})
		}},
		{"garbage-frame", "frame", "unexpected", func(nc *net.UnixConn) {
			sendHello(t, nc, nil, nil)
			var w frame.Hello
			fds, err := readHandshake(nc, frame.TypeWelcome, &w)
			require.NoError(t, err)
			closeFDs(fds)
			_, err = nc.Write(frame.Append(nil, &frame.Header{Type: frame.TypeData, ID: 3}))
			require.NoError(t, err)
		}},
		{"malformed-frame", "frame", "unknown type", func(nc *net.UnixConn) {
			sendHello(t, nc, nil, nil)
			var w frame.Hello
			fds, err := readHandshake(nc, frame.TypeWelcome, &w)
			require.NoError(t, err)
			closeFDs(fds)
			_, err = nc.Write(bytes.Repeat([]byte{0xee}, frame.HeaderSize))
			require.NoError(t, err)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := dial(t, f.addr)
			tc.run(nc)
			requireClosed(t, nc)
			f.requireReported(t, tc.stage, tc.reason)
			f.requireHealthy(t)
		})
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// TestReadOnlyDescriptors checks that a peer gets a read-only descriptor
// for a region it may only read, so the kernel refuses it a writable
// mapping, and a read-write one otherwise.
func TestReadOnlyDescriptors(t *testing.T) {
	f := newFixture(t)
	nc := dial(t, f.addr)
	sendHello(t, nc, nil, nil)
	var w frame.Hello
	fds, err := readHandshake(nc, frame.TypeWelcome, &w)
	require.NoError(t, err)
	defer closeFDs(fds)
	require.Len(t, fds, 3) // rw, ro, probe
	modes := map[string]int{}
	for i, fd := range fds {
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		require.NoError(t, err)
		name := "probe"
		if i < len(w.Regions) {
			name = w.Regions[i].Name
		}
		modes[name] = fl & unix.O_ACCMODE
		_, err = unix.Mmap(fd, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if modes[name] == unix.O_RDONLY {
			require.ErrorIs(t, err, unix.EACCES, "%s: writable mapping of a read-only region", name)
		}
	}
	require.Equal(t, map[string]int{"rw": unix.O_RDWR, "ro": unix.O_RDONLY, "probe": unix.O_RDONLY}, modes)
	seals, err := unix.FcntlInt(uintptr(fds[0]), unix.F_GET_SEALS, 0)
	require.NoError(t, err)
	require.Equal(t, seals&(unix.F_SEAL_SHRINK|unix.F_SEAL_GROW), unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
}

// TestRequesterRejectsBadWelcome checks the requester's side: an owner
// that sends an unsealed memfd is refused.
func TestRequesterRejectsBadWelcome(t *testing.T) {
	addr := rawAddr("fake-owner")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		nc, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		defer nc.Close()
		var h frame.Hello
		fds, err := readHandshake(nc, frame.TypeHello, &h)
		if err != nil {
			return
		}
		closeFDs(fds)
		w := frame.Hello{Lanes: 1, ConnID: 1, Token: 1, ProbeKey: 9, ProbeLen: 4 << 20,
			Regions: []verbs.RegionInfo{{Name: "t", Key: 3, Len: 4096, Access: verbs.AccessRemoteRead}}}
		out := frame.Append(nil, &frame.Header{Type: frame.TypeWelcome, Len: uint32(frame.HelloSize(&w))})
		_ = sendMsg(nc, frame.AppendHello(out, &w), []int{testMemfd(t, 4096, false), testMemfd(t, 4<<20, true)})
		var b [1]byte
		_, _ = nc.Read(b[:])
	}()
	tr := New(Config{})
	defer tr.Close()
	_, err = tr.Connect(verbstest.Context(t), addr, verbs.ConnectOptions{})
	require.ErrorIs(t, err, verbs.ErrProtocol)
	require.ErrorContains(t, err, "not sealed")
}
