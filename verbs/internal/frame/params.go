package frame

import (
	"encoding/binary"
	"math"
	"time"

	"github.com/scatterkit/scatterkit/verbs"
)

// ParamsSize is the size of a PARAMS body.
const ParamsSize = 32

// AppendParams appends the PARAMS body for p: Bandwidth and PostRate as
// float64 bits, QueueDepth as uint64, RTT in nanoseconds as uint64.
func AppendParams(dst []byte, p verbs.LinkParams) []byte {
	var b [ParamsSize]byte
	binary.LittleEndian.PutUint64(b[0:], math.Float64bits(p.Bandwidth))
	binary.LittleEndian.PutUint64(b[8:], math.Float64bits(p.PostRate))
	binary.LittleEndian.PutUint64(b[16:], uint64(p.QueueDepth))
	binary.LittleEndian.PutUint64(b[24:], uint64(p.RTT))
	return append(dst, b[:]...)
}

// DecodeParams decodes a PARAMS body, rejecting non-finite or negative
// rates, a queue depth above verbs.MaxQueueDepth and a negative RTT.
func DecodeParams(b []byte) (verbs.LinkParams, error) {
	if len(b) != ParamsSize {
		return verbs.LinkParams{}, bad("params", "wrong size")
	}
	bw := math.Float64frombits(binary.LittleEndian.Uint64(b[0:]))
	pr := math.Float64frombits(binary.LittleEndian.Uint64(b[8:]))
	qd := binary.LittleEndian.Uint64(b[16:])
	rtt := binary.LittleEndian.Uint64(b[24:])
	if !finite(bw) || !finite(pr) || qd > verbs.MaxQueueDepth || rtt > math.MaxInt64 {
		return verbs.LinkParams{}, bad("params", "value out of range")
	}
	return verbs.LinkParams{Bandwidth: bw, PostRate: pr, QueueDepth: int(qd), RTT: time.Duration(rtt)}, nil
}

func finite(f float64) bool { return f >= 0 && !math.IsInf(f, 0) && !math.IsNaN(f) }
