package verbstest

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

// The helpers below serve a backend's own tests that attack a segment
// (raw sockets speaking bad frames) beside a healthy connection, which
// must survive every attack.

// ErrorLog returns a ListenOptions.OnError that sends every reported
// error to errs, dropping it when errs is full (OnError must not block).
func ErrorLog(errs chan<- error) func(error) {
	return func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
}

// RequireReads checks that c still READs correct data: 4096 bytes of
// remote (the owner's exported region) from off, into a region of tr, its
// transport.
func RequireReads(tb testing.TB, tr verbs.Transport, c verbs.Conn, remote *verbs.Region, off uint64) {
	tb.Helper()
	local, err := tr.Alloc(4096, verbs.AccessLocal)
	require.NoError(tb, err)
	defer tr.Deregister(local)
	cs := make([]verbs.Completion, 1)
	_, err = Drive(Context(tb), c, []verbs.WorkRequest{{ID: 1, Op: verbs.OpRead, Len: 4096,
		LocalKey: local.Key(), RemoteKey: remote.Key(), RemoteOff: off}}, cs)
	require.NoError(tb, err)
	RequireOK(tb, cs)
	require.True(tb, bytes.Equal(remote.Bytes()[off:off+4096], local.Bytes()))
}
