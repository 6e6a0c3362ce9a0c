package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/bufferpool"
	"github.com/scatterkit/scatterkit/cudagather"
	"github.com/scatterkit/scatterkit/engram"
	"github.com/scatterkit/scatterkit/engram/snapshot"
	"github.com/scatterkit/scatterkit/verbs/transports"
)

func TestClassify(t *testing.T) {
	_, unknownTransport := transports.New("udp", transports.Config{})
	table := func(err error) error { return &engram.TableError{Table: "a", Op: "populate", Err: err} }
	for _, tc := range []struct {
		err  error
		want code
	}{
		{nil, codeOK},
		{fmt.Errorf("wrapped: %w", &engram.IDError{T: 1, K: 2, ID: 9}), codeID},
		{engram.ErrClosed, codeClosed},
		{&HandleError{Handle: 7, Want: kindStore}, codeClosed},
		{table(engram.ErrUnknownTable), codeNoTable},
		{table(fmt.Errorf("%w: %w", engram.ErrExists, snapshot.ErrExists)), codeExist},
		{fmt.Errorf("engram: buffer: exhausted (%w)", bufferpool.ErrExhausted), codeNoMem},
		{fmt.Errorf("engram: buffer: (%w)", bufferpool.ErrTooLarge), codeNoMem},
		{fmt.Errorf("%w: mmap", errNoMemory), codeNoMem},
		{table(engram.ErrReadOnly), codeNotSup},
		{errNotSupported, codeNotSup},
		{engram.ErrShape, codeInval},
		{engram.ErrRowBytes, codeInval},
		{engram.ErrOutput, codeInval},
		{engram.ErrUnregisteredOutput, codeInval},
		{fmt.Errorf("%w: no tables", engram.ErrConfig), codeInval},
		{table(engram.ErrRowsSize), codeInval},
		{table(snapshot.ErrSourceSize), codeInval},
		{unknownTransport, codeInval},
		{badArg("t", "negative"), codeInval},
		{table(engram.ErrNotPopulated), codeIO},
		{table(engram.ErrServed), codeIO},
		{&PanicError{Value: "boom"}, codeIO},
		{io.ErrUnexpectedEOF, codeIO},
		{errAborted, codeIO},
		{fmt.Errorf("status: %w", &cudagather.IDError{T: 1, K: 2}), codeID},
		{cudagather.ErrClosed, codeClosed},
		{&HandleError{Handle: 7, Want: kindDevice}, codeClosed},
		{cudagather.ErrNotSupported, codeNotSup},
		{errNoCUDA, codeNotSup},
		{&cudagather.ArgError{Field: "Out", Reason: "rows reach past"}, codeInval},
		{&cudagather.DriverError{Call: "cuLaunchKernel", Code: 700, Msg: "CUDA_ERROR_ILLEGAL_ADDRESS"}, codeIO},
		{fmt.Errorf("%w: 1 tables", cudagather.ErrBusy), codeIO},
	} {
		t.Run(fmt.Sprint(tc.err), func(t *testing.T) {
			require.Equal(t, tc.want, classify(tc.err))
		})
	}
}

func TestErrorSet(t *testing.T) {
	t.Run("id", func(t *testing.T) {
		var e cError
		err := fmt.Errorf("x: %w", &engram.IDError{T: 3, K: 4, ID: -7, Rows: 10, Table: "a"})
		require.Equal(t, codeID, e.set(err))
		require.Equal(t, [4]int64{int64(codeID), 3, 4, -7}, [4]int64{int64(e.Code), e.T, e.K, e.ID})
		require.Equal(t, err.Error(), cstring(e.Msg[:]))
	})
	t.Run("device id", func(t *testing.T) {
		e := cError{ID: 5}
		err := fmt.Errorf("x: %w", &cudagather.IDError{T: 3, K: 4})
		require.Equal(t, codeID, e.set(err))
		require.Equal(t, [4]int64{int64(codeID), 3, 4, -1}, [4]int64{int64(e.Code), e.T, e.K, e.ID})
	})
	t.Run("other", func(t *testing.T) {
		e := cError{T: 5, K: 5, ID: 5}
		require.Equal(t, codeNoTable, e.set(engram.ErrUnknownTable))
		require.Equal(t, [3]int64{-1, -1, -1}, [3]int64{e.T, e.K, e.ID})
		require.Equal(t, engram.ErrUnknownTable.Error(), cstring(e.Msg[:]))
	})
	for _, tc := range []struct{ name, msg string }{
		{"exactly full", strings.Repeat("x", msgLen-1)},
		{"ascii, long", strings.Repeat("x", 3*msgLen)},
		{"runes across the cut", strings.Repeat("x", msgLen-3) + strings.Repeat("é€😀", 100)},
		{"4-byte runes", strings.Repeat("😀", msgLen)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e cError
			for i := range e.Msg {
				e.Msg[i] = 0xFF
			}
			e.set(errors.New(tc.msg))
			got := cstring(e.Msg[:])
			require.LessOrEqual(t, len(got), msgLen-1)
			require.True(t, utf8.ValidString(got))
			require.True(t, strings.HasPrefix(tc.msg, got))
			require.Greater(t, len(got), msgLen-5, "cut at most one rune short")
		})
	}
}

// cstring is the NUL-terminated string at the start of b (the test
// fails without a NUL).
func cstring(b []byte) string {
	i := strings.IndexByte(string(b), 0)
	if i < 0 {
		panic("no NUL")
	}
	return string(b[:i])
}

func TestProtect(t *testing.T) {
	require.NoError(t, protect(func() error { return nil }))
	require.Equal(t, io.EOF, protect(func() error { return io.EOF }))
	err := protect(func() error {
		var m map[string]int
		m["x"] = 1 // a broken invariant
		return nil
	})
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, codeIO, classify(err))
	require.Contains(t, err.Error(), "capi: internal error: panic: assignment to entry in nil map")
}

func TestOpenConfig(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, json string
		want       code
	}{
		{"unknown key", `{"namespace":"ns","tables":{"a":{"num_rows":1,"row_bytes":1}},"local_dir":"D","color":1}`, codeInval},
		{"unknown table key", `{"namespace":"ns","tables":{"a":{"num_rows":1,"row_bytes":1,"dtype":"u8"}},"local_dir":"D"}`, codeInval},
		{"trailing data", `{"namespace":"ns","tables":{"a":{"num_rows":1,"row_bytes":1}},"local_dir":"D"} {}`, codeInval},
		{"not json", `namespace=ns`, codeInval},
		{"wrong type", `{"namespace":"ns","tables":{"a":{"num_rows":"1","row_bytes":1}},"local_dir":"D"}`, codeInval},
		{"bad pin", `{"namespace":"ns","tables":{"a":{"num_rows":1,"row_bytes":1}},"local_dir":"D","pin":"always"}`, codeInval},
		{"negative workers", `{"namespace":"ns","tables":{"a":{"num_rows":1,"row_bytes":1}},"local_dir":"D","workers":-1}`, codeInval},
		{"no tables", `{"namespace":"ns","local_dir":"D"}`, codeInval},
		{"no rows", `{"namespace":"ns","tables":{"a":{"row_bytes":1}},"local_dir":"D"}`, codeInval},
		{"bad namespace", `{"namespace":"../x","tables":{"a":{"num_rows":1,"row_bytes":1}},"local_dir":"D"}`, codeInval},
		{"bad table name", `{"namespace":"ns","tables":{"a/b":{"num_rows":1,"row_bytes":1}},"local_dir":"D"}`, codeInval},
		{"neither", `{"namespace":"ns","tables":{"a":{"num_rows":1,"row_bytes":1}}}`, codeInval},
		{"both", `{"namespace":"ns","tables":{"a":{"num_rows":1,"row_bytes":1}},"local_dir":"D","remote":{"addr":"127.0.0.1:1"}}`, codeInval},
		{"unknown transport", `{"namespace":"ns","tables":{"a":{"num_rows":1,"row_bytes":1}},"remote":{"transport":"udp","addr":"x"}}`, codeInval},
		{"negative buffer", `{"namespace":"ns","tables":{"a":{"num_rows":1,"row_bytes":1}},"remote":{"addr":"x","buffer_bytes":-1}}`, codeInval},
		{"negative capture spin", `{"namespace":"ns","tables":{"a":{"num_rows":1,"row_bytes":1}},"remote":{"addr":"x","capture_spin_us":-1}}`, codeInval},
		{"capture spin past a minute", `{"namespace":"ns","tables":{"a":{"num_rows":1,"row_bytes":1}},"remote":{"addr":"x","capture_spin_us":60000001}}`, codeInval},
		{"capture spin of the wrong type", `{"namespace":"ns","tables":{"a":{"num_rows":1,"row_bytes":1}},"remote":{"addr":"x","capture_spin_us":"2ms"}}`, codeInval},
		{"no owner there", `{"namespace":"ns","tables":{"a":{"num_rows":1,"row_bytes":1}},"remote":{"addr":"127.0.0.1:1","buffer_bytes":65536}}`, codeIO},
		{"addr and shards", `{"namespace":"ns","tables":{"a":{"num_rows":1,"row_bytes":1}},"remote":{"addr":"x","shards":[{"table":"a","lo":0,"hi":1,"addrs":["x"]}]}}`, codeInval},
		{"no addr, no shards", `{"namespace":"ns","tables":{"a":{"num_rows":1,"row_bytes":1}},"remote":{"transport":"tcp"}}`, codeInval},
		{"bad shard", `{"namespace":"ns","tables":{"a":{"num_rows":1,"row_bytes":1}},"remote":{"shards":[{"table":"a","lo":1,"hi":1,"addrs":["x"]}]}}`, codeInval},
		{"shard unknown key", `{"namespace":"ns","tables":{"a":{"num_rows":1,"row_bytes":1}},"remote":{"shards":[{"table":"a","rows":1}]}}`, codeInval},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := open([]byte(strings.ReplaceAll(tc.json, `"D"`, fmt.Sprintf("%q", dir))))
			requireCode(t, tc.want, err)
		})
	}
	t.Run("every key", func(t *testing.T) {
		h, err := open([]byte(fmt.Sprintf(`{"namespace":"ns","tables":{"a":{"num_rows":3,"row_bytes":2}},"local_dir":%q,
			"workers":2,"pin":"none","skip_row_checksums":true}`, dir)))
		require.NoError(t, err)
		spec, pop, err := tableSpec(h, "a")
		require.NoError(t, err)
		require.Equal(t, engram.TableSpec{NumRows: 3, RowBytes: 2}, spec)
		require.False(t, pop)
		_, _, err = tableSpec(h, "b")
		requireCode(t, codeNoTable, err)
		require.NoError(t, closeStore(h))
		_, _, err = tableSpec(h, "a")
		requireCode(t, codeClosed, err)
	})
}
