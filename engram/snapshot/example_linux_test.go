//go:build linux

package snapshot_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/scatterkit/scatterkit/engram/snapshot"
)

// A table is published once into a namespace directory, refused a second
// time, then opened (checked and pinned) by any number of readers.
func Example() {
	root, err := os.MkdirTemp("", "engram-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(root)
	dir := filepath.Join(root, "model-a") // a namespace is a directory
	if err := os.Mkdir(dir, 0o755); err != nil {
		fmt.Println(err)
		return
	}

	spec := snapshot.Spec{Name: "ngram.l0", NumRows: 4, RowBytes: 8}
	rows := []byte("row0:aa.row1:bb.row2:cc.row3:dd.")
	if err := snapshot.Create(dir, spec, rows, nil); err != nil {
		fmt.Println(err)
		return
	}
	err = snapshot.Create(dir, spec, rows, nil)
	fmt.Println("create again:", errors.Is(err, snapshot.ErrExists))

	tbl, err := snapshot.Open(dir, spec.Name, &spec, &snapshot.OpenOptions{Pin: snapshot.PinBestEffort})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("row 2: %s, verified: %v\n", tbl.Row(2), tbl.Verified)
	if err := tbl.Close(); err != nil {
		fmt.Println(err)
	}

	specs, err := snapshot.List(dir)
	fmt.Println(specs, err)
	fmt.Println("remove:", snapshot.Remove(dir, spec.Name, nil))
	_, err = snapshot.Open(dir, spec.Name, nil, nil)
	fmt.Println("open after remove:", errors.Is(err, snapshot.ErrNotExist))
	// Output:
	// create again: true
	// row 2: row2:cc., verified: true
	// ["ngram.l0"[4 x 8 B]] <nil>
	// remove: <nil>
	// open after remove: true
}

// CreateFrom streams rows from a reader through one bounded buffer, so a
// table larger than memory can be published.
func ExampleCreateFrom() {
	dir, err := os.MkdirTemp("", "engram-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	spec := snapshot.Spec{Name: "layer-7", NumRows: 1000, RowBytes: 264}
	src := bytes.NewReader(bytes.Repeat([]byte("engram!"), 40_000)) // more than the table
	err = snapshot.CreateFrom(dir, spec, src, &snapshot.CreateOptions{ChunkBytes: 64 << 10})
	fmt.Println("created:", err, "left unread:", src.Len())

	err = snapshot.CreateFrom(dir, snapshot.Spec{Name: "short", NumRows: 1000, RowBytes: 264}, bytes.NewReader([]byte("too short")), nil)
	var se *snapshot.SourceError
	fmt.Println(errors.As(err, &se), se.Got, se.Want)

	h, err := snapshot.ReadHeader(filepath.Join(dir, snapshot.FileName(spec.Name)))
	fmt.Println(h.Spec, h.RowOffset, h.FileSize, err)
	fmt.Println("verify:", snapshot.Verify(filepath.Join(dir, snapshot.FileName(spec.Name))))
	// Output:
	// created: <nil> left unread: 16000
	// true 9 264000
	// "layer-7"[1000 x 264 B] 65536 329536 <nil>
	// verify: <nil>
}
