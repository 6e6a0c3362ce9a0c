package discovery_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/scatterkit/scatterkit/verbs/discovery"
)

func TestValidateName(t *testing.T) {
	tests := []struct {
		name  string
		valid bool
	}{
		{"a", true},
		{"0", true},
		{"engram/layer3/shard0", true},
		{"tcp:node7.example_1-x", true},
		{"a/b.c/d_e/f-g/h:i", true},
		{strings.Repeat("a", discovery.MaxNameLen), true},
		{"", false},
		{strings.Repeat("a", discovery.MaxNameLen+1), false},
		{"/a", false},
		{"a/", false},
		{"a//b", false},
		{"a/.b", false},
		{"a/-b", false},
		{"_a", false},
		{":a", false},
		{"a b", false},
		{"a\tb", false},
		{"a*b", false},
		{"a\u00e9", false},
		{"a\x00", false},
		{"a\\b", false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q", tc.name), func(t *testing.T) {
			err := discovery.ValidateName(tc.name)
			if tc.valid {
				require.NoError(t, err)
				require.NoError(t, discovery.ValidatePrefix(tc.name), "a valid name is a valid prefix")
				return
			}
			require.ErrorIs(t, err, discovery.ErrInvalidName)
			var ne *discovery.NameError
			require.ErrorAs(t, err, &ne)
			require.Equal(t, tc.name, ne.Name)
			require.NotEmpty(t, ne.Reason)
			require.True(t, strings.HasPrefix(err.Error(), "discovery: invalid name"), err.Error())
		})
	}
}

func TestValidatePrefix(t *testing.T) {
	tests := []struct {
		prefix string
		valid  bool
	}{
		{"", true},
		{"engram/", true},
		{"engram/lay", true},
		{"a.", true},
		{"a/b/", true},
		{strings.Repeat("a", discovery.MaxNameLen), true},
		{strings.Repeat("a", discovery.MaxNameLen+1), false},
		{"/", false},
		{"a//", false},
		{"a/.", false},
		{"a b", false},
		{".", false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q", tc.prefix), func(t *testing.T) {
			err := discovery.ValidatePrefix(tc.prefix)
			if tc.valid {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, discovery.ErrInvalidName)
			}
		})
	}
}

func TestPreparePublish(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	loc := time.FixedZone("plus2", 2*3600)
	in := discovery.Record{
		Name: "seg", Transport: "rdma", Addr: "10.0.0.1:4791", Revision: 77,
		Attrs:   map[string]string{"rkey": "1"},
		Expires: now.Add(time.Minute).In(loc),
	}
	got, err := discovery.PreparePublish(in, now)
	require.NoError(t, err)
	want := discovery.Record{
		Name: "seg", Transport: "rdma", Addr: "10.0.0.1:4791", Owner: discovery.DefaultOwner(),
		Attrs: map[string]string{"rkey": "1"}, Expires: now.Add(time.Minute),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	require.Equal(t, time.UTC, got.Expires.Location())
	in.Attrs["rkey"] = "2"
	require.Equal(t, "1", got.Attrs["rkey"], "PreparePublish must copy Attrs")

	in.Expires = now
	_, err = discovery.PreparePublish(in, now)
	require.ErrorIs(t, err, discovery.ErrInvalidRecord)

	in.Expires = time.Time{}
	in.Attrs = map[string]string{}
	got, err = discovery.PreparePublish(in, now)
	require.NoError(t, err)
	require.Nil(t, got.Attrs)
	require.True(t, got.Expires.IsZero())
}

func TestRecordExpired(t *testing.T) {
	now := time.Now()
	require.False(t, discovery.Record{}.Expired(now))
	require.False(t, discovery.Record{Expires: now.Add(time.Nanosecond)}.Expired(now))
	require.True(t, discovery.Record{Expires: now}.Expired(now))
	require.True(t, discovery.Record{Expires: now.Add(-time.Hour)}.Expired(now))
}

func TestRecordValidateRevision(t *testing.T) {
	r := discovery.Record{Name: "a", Transport: "tcp", Addr: "x:1", Revision: -1}
	var re *discovery.RecordError
	require.ErrorAs(t, r.Validate(), &re)
	require.Equal(t, "Revision", re.Field)
}

func TestDefaultOwner(t *testing.T) {
	owner := discovery.DefaultOwner()
	require.NoError(t, discovery.Record{Name: "a", Transport: "tcp", Addr: "x:1", Owner: owner}.Validate())
	require.True(t, strings.HasSuffix(owner, fmt.Sprintf("/%d", os.Getpid())), owner)
}

func TestEventKindString(t *testing.T) {
	require.Equal(t, "put", discovery.EventPut.String())
	require.Equal(t, "delete", discovery.EventDelete.String())
	require.Equal(t, "EventKind(9)", discovery.EventKind(9).String())
}

func TestErrors(t *testing.T) {
	inner := errors.New("unexpected EOF")
	tests := []struct {
		name string
		err  error
		is   []error
		msg  string
	}{
		{"name", &discovery.NameError{Name: "a b", Reason: "space"}, []error{discovery.ErrInvalidName}, `discovery: invalid name "a b": space`},
		{"record", &discovery.RecordError{Name: "a", Field: "Addr", Reason: "empty"}, []error{discovery.ErrInvalidRecord}, `discovery: invalid record "a": Addr: empty`},
		{"exists", &discovery.ExistsError{Name: "a", Holder: discovery.Record{Owner: "h/1", Revision: 3}}, []error{discovery.ErrExists}, `discovery: name "a" held by live owner "h/1" (revision 3)`},
		{"corrupt", &discovery.CorruptError{Source: "f.json", Reason: "bad JSON", Err: inner}, []error{discovery.ErrCorrupt, inner}, "discovery: corrupt data in f.json: bad JSON: unexpected EOF"},
		{"corrupt bare", &discovery.CorruptError{Source: "k", Reason: "name mismatch"}, []error{discovery.ErrCorrupt}, "discovery: corrupt data in k: name mismatch"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wrapped := fmt.Errorf("publish: %w", tc.err)
			for _, target := range tc.is {
				require.ErrorIs(t, wrapped, target)
			}
			require.NotErrorIs(t, wrapped, discovery.ErrNotFound)
			require.Equal(t, tc.msg, tc.err.Error())
		})
	}
}
