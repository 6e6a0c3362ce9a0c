package structobj

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs"
)

func TestOwnerErrorText(t *testing.T) {
	cases := []struct {
		text string
		ok   bool
		code Code
		is   error
	}{
		{"structobj notfound: no key \"a\"", true, CodeNotFound, ErrNotFound},
		{"structobj nospace: 128 bytes wanted", true, CodeNoSpace, ErrNoSpace},
		{"structobj expired: reservation 3 expired", true, CodeExpired, ErrExpired},
		{"structobj refused: structobj: commit request: key: 0 bytes", true, CodeRefused, ErrRefused},
		{"structobj busy: 4096 holds outstanding", true, CodeBusy, ErrBusy},
		{"structobj closed: owner closing", true, CodeClosed, ErrClosed},
		{"structobj later: a code of a newer owner", true, "later", nil},
		{"structobj : empty code", false, "", nil},
		{"structobj Refused: capital", false, "", nil},
		{"structobj refused no colon", false, "", nil},
		{"verbs: gather refused: x", false, "", nil},
		{"", false, "", nil},
	}
	for _, c := range cases {
		oe, ok := parseOwnerError(c.text)
		require.Equal(t, c.ok, ok, c.text)
		if !ok {
			continue
		}
		require.Equal(t, c.code, oe.Code)
		require.Equal(t, c.text, oe.Error(), "the text round-trips")
		for _, s := range []error{ErrNotFound, ErrNoSpace, ErrExpired, ErrRefused, ErrBusy, ErrClosed} {
			require.Equal(t, s == c.is, errors.Is(oe, s), "%q is %v", c.text, s)
		}
	}
}

func TestDecodeCallError(t *testing.T) {
	ce := &verbs.CallError{Method: MethodCommit, Status: verbs.StatusHandler, Message: "structobj expired: reservation 3 expired"}
	err := decodeCallError(fmt.Errorf("commit: %w", ce))
	var oe *OwnerError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, CodeExpired, oe.Code)
	require.Equal(t, "reservation 3 expired", oe.Detail)
	require.Same(t, ce, oe.Call)
	require.ErrorIs(t, err, ErrExpired)
	require.ErrorIs(t, err, verbs.ErrHandler)

	for _, other := range []error{
		nil,
		errors.New("plain"),
		&verbs.CallError{Method: MethodCommit, Status: verbs.StatusNotSupported, Message: "structobj busy: x"},
		&verbs.CallError{Method: MethodCommit, Status: verbs.StatusHandler, Message: "something else"},
	} {
		require.Equal(t, other, decodeCallError(other))
	}
}

func FuzzDecodeCallError(f *testing.F) {
	for _, s := range []string{"structobj notfound: no key \"a\"", "structobj busy: x", "structobj : x", "verbs: gather refused: x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		err := decodeCallError(&verbs.CallError{Method: MethodOpen, Status: verbs.StatusHandler, Message: msg})
		oe, ok := err.(*OwnerError)
		if !ok {
			return
		}
		if oe.Error() != msg {
			t.Fatalf("text %q parsed as %q", msg, oe.Error())
		}
		if s := oe.Code.sentinel(); s != nil && !errors.Is(err, s) {
			t.Fatalf("%q does not match %v", msg, s)
		}
		if !errors.Is(err, verbs.ErrHandler) {
			t.Fatalf("%q does not match verbs.ErrHandler", msg)
		}
	})
}
