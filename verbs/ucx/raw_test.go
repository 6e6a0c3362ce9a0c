//go:build ucx

package ucx_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
	"github.com/scatterkit/scatterkit/verbs/internal/verbstest"
	"github.com/scatterkit/scatterkit/verbs/ucx"
)

// TestHostileHandshakes: what a peer sends before it is admitted never
// reaches UCX and never hangs the segment. Garbage, a HELLO whose
// attachment length is past the bound, one whose attachment does not
// match the regions the HELLO lists, one cut short, and silence each end
// with the connection closed (within the handshake timeout), an error to
// OnError, and the segment serving the next requester as before.
func TestHostileHandshakes(t *testing.T) {
	t.Setenv("UCX_TLS", "tcp")
	t.Setenv("UCX_NET_DEVICES", "lo")
	owner, err := ucx.New(ucx.Config{HandshakeTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	defer owner.Close()
	req, err := ucx.New(ucx.Config{})
	require.NoError(t, err)
	defer req.Close()
	table, err := owner.Alloc(4096, verbs.AccessRemoteRead)
	require.NoError(t, err)
	var mu sync.Mutex
	var errs []error
	seg, err := owner.Listen("127.0.0.1:0", []verbs.Export{{Name: "table", Region: table}}, verbs.ListenOptions{OnError: func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}})
	require.NoError(t, err)
	defer seg.Close()

	hello := func(regions []verbs.RegionInfo, attach []byte, attachLen uint32) []byte {
		h := frame.Hello{Lanes: 1, QueueDepth: 64, Regions: regions}
		b := frame.Append(nil, &frame.Header{Type: frame.TypeHello, Len: uint32(frame.HelloSize(&h))})
		b = frame.AppendHello(b, &h)
		b = binary.LittleEndian.AppendUint32(b, attachLen)
		return append(b, attach...)
	}
	goodAttach, err := ucx.AppendAttachment(nil, &ucx.Attachment{Worker: []byte{1, 2, 3}})
	require.NoError(t, err)
	listed := []verbs.RegionInfo{{Name: "x", Key: 7, Len: 64, Access: verbs.AccessRemoteRead}}
	for _, tc := range []struct {
		name string
		send []byte
		want error // in what OnError gets; nil: any error
	}{
		{"garbage", bytes.Repeat([]byte("GET / HTTP/1.1\r\n"), 8), verbs.ErrProtocol},
		{"garbage, shorter than a header", []byte("GET /\r\n"), nil}, // waits, then the handshake times out
		{"attachment past the bound", hello(nil, nil, 1<<30), verbs.ErrProtocol},
		{"attachment for other regions", hello(listed, goodAttach, uint32(len(goodAttach))), verbs.ErrProtocol},
		{"attachment cut short", hello(nil, goodAttach[:5], uint32(len(goodAttach))), nil},
		{"silence", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			before := len(errs)
			mu.Unlock()
			nc, err := net.Dial("tcp", seg.Addr())
			require.NoError(t, err)
			defer nc.Close()
			if len(tc.send) > 0 {
				_, err = nc.Write(tc.send)
				require.NoError(t, err)
			}
			if tc.name == "attachment cut short" {
				_ = nc.(*net.TCPConn).CloseWrite()
			}
			_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = io.Copy(io.Discard, nc)
			require.NoError(t, err, "the segment closes the connection (EOF) within the handshake timeout")
			require.Eventually(t, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(errs) > before
			}, 5*time.Second, time.Millisecond)
			mu.Lock()
			got := errs[len(errs)-1]
			mu.Unlock()
			if tc.want != nil {
				require.True(t, errors.Is(got, tc.want), "%T %v", got, got)
			}
		})
	}
	// The segment serves the next requester as before.
	c, err := req.Connect(verbstest.Context(t), seg.Addr(), verbs.ConnectOptions{})
	require.NoError(t, err)
	_, ok := verbs.FindRegion(c.Remote(), "table")
	require.True(t, ok)
	require.NoError(t, c.Close())
}
