package calls

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/frame"
)

var errEnded = errors.New("connection ended")

func ended(err error) error { return fmt.Errorf("%w: %w", errEnded, err) }

// stream is a frame stream holding one answer and, after it, a PING (to
// show the reader stopped exactly at the answer's end).
func stream(h frame.Header, body []byte) (*frame.Reader, *frame.Header) {
	h.Len = uint32(len(body))
	b := frame.Append(nil, &h)
	b = append(b, body...)
	b = frame.Append(b, &frame.Header{Type: frame.TypePing, ID: 77})
	rd := frame.NewReader(bytes.NewReader(b), 4096)
	var got frame.Header
	if err := rd.Next(&got); err != nil {
		panic(err)
	}
	return rd, &got
}

func requireNextPing(t *testing.T, rd *frame.Reader) {
	t.Helper()
	var h frame.Header
	require.NoError(t, rd.Next(&h))
	require.Equal(t, frame.TypePing, h.Type)
	require.Equal(t, uint64(77), h.ID)
}

func TestAnswerDelivers(t *testing.T) {
	long := strings.Repeat("e", verbs.MaxErrorMessage+100)
	for _, tc := range []struct {
		name   string
		ping   bool
		typ    frame.Type
		status verbs.Status
		body   string
		want   string // response, or error text
	}{
		{"reply", false, frame.TypeReply, verbs.StatusOK, "rows 1..9", "rows 1..9"},
		{"empty-reply", false, frame.TypeReply, verbs.StatusOK, "", ""},
		{"pong", true, frame.TypePong, verbs.StatusOK, "", ""},
		{"handler-error", false, frame.TypeReply, verbs.StatusHandler, "no such table", "no such table"},
		{"long-error", false, frame.TypeReply, verbs.StatusHandler, long, long[:verbs.MaxErrorMessage]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := NewTable()
			buf := make([]byte, 0, 4)
			id, p, err := tab.Start(tc.ping, buf)
			require.NoError(t, err)
			rd, h := stream(frame.Header{Type: tc.typ, Status: tc.status, ID: id}, []byte(tc.body))
			require.NoError(t, tab.Answer(rd, h, "peer", ended))
			requireNextPing(t, rd)
			out, err := tab.Wait(context.Background(), id, p, 4, buf)
			if tc.status == verbs.StatusOK {
				require.NoError(t, err)
				require.Equal(t, tc.want, string(out))
				return
			}
			var ce *verbs.CallError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tc.status, ce.Status)
			require.Equal(t, tc.want, ce.Message)
		})
	}
}

func TestAnswerAbandoned(t *testing.T) {
	tab := NewTable()
	rd, h := stream(frame.Header{Type: frame.TypeReply, ID: 41}, []byte("late answer"))
	require.NoError(t, tab.Answer(rd, h, "peer", ended), "an answer nobody waits for is drained")
	requireNextPing(t, rd)
}

func TestAnswerWrongKind(t *testing.T) {
	for _, tc := range []struct {
		name string
		ping bool
		typ  frame.Type
	}{
		{"pong-for-call", false, frame.TypePong},
		{"reply-for-ping", true, frame.TypeReply},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := NewTable()
			id, p, err := tab.Start(tc.ping, nil)
			require.NoError(t, err)
			rd, h := stream(frame.Header{Type: tc.typ, ID: id}, nil)
			err = tab.Answer(rd, h, "10.1.2.3:4", ended)
			var pe *verbs.ProtocolError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, "10.1.2.3:4", pe.Peer)
			require.Equal(t, "frame", pe.Stage)
			_, err = tab.Wait(context.Background(), id, p, 1, nil)
			require.ErrorIs(t, err, errEnded)
			require.ErrorIs(t, err, verbs.ErrProtocol)
		})
	}
}

func TestAnswerTruncated(t *testing.T) {
	for _, st := range []verbs.Status{verbs.StatusOK, verbs.StatusHandler} {
		t.Run(st.String(), func(t *testing.T) {
			tab := NewTable()
			id, p, err := tab.Start(false, nil)
			require.NoError(t, err)
			h := frame.Header{Type: frame.TypeReply, Status: st, ID: id, Len: 100}
			b := append(frame.Append(nil, &h), "only part"...)
			rd := frame.NewReader(bytes.NewReader(b), 4096)
			require.NoError(t, rd.Next(&h))
			err = tab.Answer(rd, &h, "peer", ended)
			require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			_, err = tab.Wait(context.Background(), id, p, 1, nil)
			require.ErrorIs(t, err, errEnded)
			require.ErrorIs(t, err, io.ErrUnexpectedEOF)
		})
	}
}

func TestAnswerAllocs(t *testing.T) {
	tab := NewTable()
	buf := make([]byte, 0, 64)
	body := []byte("warm reply")
	var raw []byte
	pos := 0
	rd := frame.NewReader(readerFunc(func(p []byte) (int, error) {
		n := copy(p, raw[pos:])
		pos += n
		return n, nil
	}), 4096)
	ctx := context.Background()
	var hb []byte
	run := func() {
		id, p, err := tab.Start(false, buf)
		if err != nil {
			t.Fatal(err)
		}
		hb = frame.Append(hb[:0], &frame.Header{Type: frame.TypeReply, ID: id, Len: uint32(len(body))})
		raw, pos = append(append(raw[:0], hb...), body...), 0
		var h frame.Header
		if err := rd.Next(&h); err != nil {
			t.Fatal(err)
		}
		if err := tab.Answer(rd, &h, "peer", ended); err != nil {
			t.Fatal(err)
		}
		out, err := tab.Wait(ctx, id, p, 1, buf)
		if err != nil || !bytes.Equal(out, body) {
			t.Fatalf("%q, %v", out, err)
		}
	}
	run()
	require.Zero(t, testing.AllocsPerRun(100, run))
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
