// Command packgen writes bufferpool/pack/pack_gen.go, the fixed-row-size
// gather and scatter loops of package pack (see package
// github.com/scatterkit/scatterkit/gen/packgen).
//
// Usage, from bufferpool/pack (the //go:generate line in its doc.go):
//
//	go run github.com/scatterkit/scatterkit/gen/cmd/packgen -o pack_gen.go
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/scatterkit/scatterkit/gen/packgen"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintln(os.Stderr, "packgen:", err)
		os.Exit(1)
	}
}

// run parses args, renders the file and writes it to the -o path, or to
// stdout when the path is "-". The file is rendered in full before it is
// written, so a failure leaves an existing file as it was.
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("packgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "pack_gen.go", `output file, or "-" for stdout`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var b bytes.Buffer
	if err := packgen.Render(&b); err != nil {
		return err
	}
	if *out == "-" {
		_, err := stdout.Write(b.Bytes())
		return err
	}
	return os.WriteFile(*out, b.Bytes(), 0o644)
}
