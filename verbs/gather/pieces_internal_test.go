package gather

import (
	"testing"

	"github.com/scatterkit/scatterkit/verbs"
)

// TestAppendPieces: a request longer than a piece is cut into pieces that
// cover it exactly, in order, each at most a piece, offsets advancing on
// both sides.
func TestAppendPieces(t *testing.T) {
	for _, n := range []uint64{1, piece - 1, piece, piece + 1, 3*piece + 17} {
		base := verbs.WorkRequest{ID: 7, Op: verbs.OpWrite, LocalKey: 1, LocalOff: 100, RemoteKey: 2, RemoteOff: 5000}
		wrs := appendPieces(nil, base, n)
		var got uint64
		for i, wr := range wrs {
			if wr.Len == 0 || uint64(wr.Len) > piece {
				t.Fatalf("n %d: piece %d has %d bytes", n, i, wr.Len)
			}
			if wr.LocalOff != base.LocalOff+got || wr.RemoteOff != base.RemoteOff+got || wr.ID != 7 || wr.Op != verbs.OpWrite {
				t.Fatalf("n %d: piece %d at %d/%d, want %d/%d", n, i, wr.LocalOff, wr.RemoteOff, base.LocalOff+got, base.RemoteOff+got)
			}
			got += uint64(wr.Len)
		}
		if got != n || len(wrs) != int((n+piece-1)/piece) {
			t.Fatalf("n %d: %d pieces covering %d bytes", n, len(wrs), got)
		}
	}
}
