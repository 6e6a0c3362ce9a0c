package packgen

import (
	"bytes"
	"fmt"
	"go/format"
	"io"

	"github.com/dave/jennifer/jen"
)

// The generated code refers to these names of the hand-written part of the
// target package:
//
//	type task struct {
//		packed, table, ids         unsafe.Pointer
//		n                          int
//		rowBytes, stride, idStride uintptr
//		bias                       int64
//		wide, scatter, anyRow      bool
//	}
//
// and defines (*task).run, the loops, the row types and specializedRowBytes.

const unsafePkg = "unsafe"

// idKind is one id width.
type idKind struct {
	suffix string // function name part: I32, I64
	typ    string // Go type: int32, int64
	bytes  int
}

var idKinds = []idKind{
	{suffix: "I32", typ: "int32", bytes: 4},
	{suffix: "I64", typ: "int64", bytes: 8},
}

// direction is gather (table -> packed) or scatter (packed -> table).
type direction struct {
	name    string
	scatter bool
}

var directions = []direction{{name: "gather"}, {name: "scatter", scatter: true}}

// Generate renders [Default] into a new buffer.
func Generate() ([]byte, error) {
	var b bytes.Buffer
	if err := Default.Render(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Render writes the generated file for [Default] to w.
func Render(w io.Writer) error { return Default.Render(w) }

// Render writes the generated file for s to w, gofmt-formatted. Nothing is
// written when s is invalid.
func (s Spec) Render(w io.Writer) error {
	if err := s.validate(); err != nil {
		return err
	}
	f := jen.NewFile(s.Package)
	f.HeaderComment(Header)

	s.renderSizes(f)
	for _, z := range s.Sizes {
		if z.Move == Inline {
			f.Commentf("%s is one %d-byte row, copied with inline moves.", rowType(z.RowBytes), z.RowBytes)
			f.Type().Id(rowType(z.RowBytes)).Struct(jen.Id("b").Index(jen.Lit(z.RowBytes)).Byte())
			f.Line()
		}
	}
	for _, d := range directions {
		for _, k := range idKinds {
			s.renderDispatch(f, d, k)
		}
	}
	s.renderRun(f)
	for _, d := range directions {
		for _, k := range idKinds {
			for _, z := range s.Sizes {
				renderLoop(f, d, k, z, false)
				renderLoop(f, d, k, z, true)
			}
			renderLoop(f, d, k, Size{}, false)
			renderLoop(f, d, k, Size{}, true)
		}
	}

	var raw bytes.Buffer
	if err := f.Render(&raw); err != nil {
		return fmt.Errorf("packgen: render: %w", err)
	}
	out, err := format.Source(raw.Bytes())
	if err != nil {
		return fmt.Errorf("packgen: format: %w", err)
	}
	_, err = w.Write(out)
	return err
}

func (s Spec) renderSizes(f *jen.File) {
	sizes := make([]jen.Code, len(s.Sizes))
	for i, z := range s.Sizes {
		sizes[i] = jen.Lit(z.RowBytes)
	}
	f.Comment("specializedRowBytes lists, ascending, the row sizes that have generated")
	f.Comment("loops; every other size runs the any-size loops.")
	f.Var().Id("specializedRowBytes").Op("=").Index(jen.Op("...")).Int().Values(sizes...)
	f.Line()
}

// renderRun writes (*task).run, which picks the dispatch function for the
// task's direction and id width.
func (s Spec) renderRun(f *jen.File) {
	t := jen.Id("t")
	var cases []jen.Code
	for _, d := range directions {
		for _, k := range idKinds {
			cond := jen.Op("!").Add(t.Clone().Dot("scatter"))
			if d.scatter {
				cond = t.Clone().Dot("scatter")
			}
			if k.bytes == 8 {
				cond = cond.Op("&&").Add(t.Clone().Dot("wide"))
			} else {
				cond = cond.Op("&&").Op("!").Add(t.Clone().Dot("wide"))
			}
			cases = append(cases, jen.Case(cond).Block(t.Clone().Dot(dispatchName(d, k)).Call()))
		}
	}
	f.Comment("run moves the task's rows with the loop for its direction, id width,")
	f.Comment("row size and layout. The task must have been validated.")
	f.Func().Params(jen.Id("t").Op("*").Id("task")).Id("run").Params().Block(
		jen.Switch().Block(cases...),
	)
	f.Line()
}

func dispatchName(d direction, k idKind) string { return d.name + k.suffix }

// renderDispatch writes the switch over row sizes for one direction and id
// width.
func (s Spec) renderDispatch(f *jen.File, d direction, k idKind) {
	t := func() *jen.Statement { return jen.Id("t") }
	contiguous := jen.Id("contiguous")
	call := func(z Size, strided bool) jen.Code {
		args := []jen.Code{t().Dot("packed"), t().Dot("table"), t().Dot("ids"), t().Dot("n")}
		if z.RowBytes == 0 {
			args = append(args, t().Dot("rowBytes"))
		}
		if strided {
			args = append(args, t().Dot("stride"), t().Dot("idStride"))
		}
		args = append(args, t().Dot("bias"))
		return jen.Id(loopName(d, k, z, strided)).Call(args...)
	}
	pick := func(z Size) []jen.Code {
		return []jen.Code{
			jen.If(contiguous.Clone()).Block(call(z, false), jen.Return()),
			call(z, true),
		}
	}
	var cases []jen.Code
	for _, z := range s.Sizes {
		body := append(pick(z), jen.Return())
		cases = append(cases, jen.Case(jen.Lit(z.RowBytes)).Block(body...))
	}
	body := []jen.Code{
		contiguous.Clone().Op(":=").Add(t().Dot("stride")).Op("==").Add(t().Dot("rowBytes")).
			Op("&&").Add(t().Dot("idStride")).Op("==").Lit(k.bytes),
		jen.If(jen.Op("!").Add(t().Dot("anyRow"))).Block(
			jen.Switch(t().Dot("rowBytes")).Block(cases...),
		),
	}
	body = append(body, pick(Size{})...)
	f.Commentf("%s runs the %s loop for %s ids that matches the task's row size and", dispatchName(d, k), d.name, k.typ)
	f.Comment("layout, or the any-size loop when there is none or anyRow is set.")
	f.Func().Params(jen.Id("t").Op("*").Id("task")).Id(dispatchName(d, k)).Params().Block(body...)
	f.Line()
}

// loopName names a loop; a zero Size is the any-size loop.
func loopName(d direction, k idKind, z Size, strided bool) string {
	size := "Any"
	if z.RowBytes != 0 {
		size = fmt.Sprint(z.RowBytes)
	}
	layout := "C"
	if strided {
		layout = "S"
	}
	return d.name + size + k.suffix + layout
}

func rowType(n int) string { return fmt.Sprintf("row%d", n) }

// renderLoop writes one loop. A zero Size is the any-size loop, which takes
// the row size as a parameter and copies with copy().
func renderLoop(f *jen.File, d direction, k idKind, z Size, strided bool) {
	ptr := func() *jen.Statement { return jen.Qual(unsafePkg, "Pointer") }
	add := func(base string, off jen.Code) *jen.Statement {
		return jen.Qual(unsafePkg, "Add").Call(jen.Id(base), off)
	}
	anySize := z.RowBytes == 0

	params := []jen.Code{jen.List(jen.Id("packed"), jen.Id("table"), jen.Id("ids")).Add(ptr()), jen.Id("n").Int()}
	var sizes []jen.Code
	if anySize {
		sizes = append(sizes, jen.Id("rowBytes"))
	}
	if strided {
		sizes = append(sizes, jen.Id("stride"), jen.Id("idStride"))
	}
	if len(sizes) > 0 {
		params = append(params, jen.List(sizes...).Uintptr())
	}
	params = append(params, jen.Id("bias").Int64())

	// Offsets of row i: contiguous loops use constant multipliers, strided
	// loops the stride parameters.
	var idOff, packedOff jen.Code
	var loop *jen.Statement
	switch {
	case strided:
		loop = jen.For(jen.Id("i").Op(":=").Range().Uintptr().Call(jen.Id("n")))
		idOff = jen.Id("i").Op("*").Id("idStride")
		packedOff = jen.Id("i").Op("*").Id("stride")
	case anySize:
		loop = jen.For(jen.Id("i").Op(":=").Range().Uintptr().Call(jen.Id("n")))
		idOff = jen.Id("i").Op("*").Lit(k.bytes)
		packedOff = jen.Id("i").Op("*").Id("rowBytes")
	default:
		loop = jen.For(jen.Id("i").Op(":=").Range().Id("n"))
		idOff = jen.Id("i").Op("*").Lit(k.bytes)
		packedOff = jen.Id("i").Op("*").Lit(z.RowBytes)
	}

	rowIndex := jen.Id("id").Op("-").Id("bias")
	if k.bytes != 8 {
		rowIndex = jen.Int64().Call(jen.Id("id")).Op("-").Id("bias")
	}
	var rowOff jen.Code
	if anySize {
		rowOff = jen.Uintptr().Call(rowIndex).Op("*").Id("rowBytes")
	} else {
		rowOff = jen.Parens(rowIndex).Op("*").Lit(z.RowBytes)
	}

	src, dst := jen.Id("row"), jen.Id("at")
	if d.scatter {
		src, dst = jen.Id("at"), jen.Id("row")
	}
	var move jen.Code
	switch {
	case anySize:
		slice := func(p *jen.Statement) jen.Code {
			return jen.Qual(unsafePkg, "Slice").Call(jen.Parens(jen.Op("*").Byte()).Parens(p), jen.Id("rowBytes"))
		}
		move = jen.Copy(slice(dst), slice(src))
	case z.Move == Inline:
		cast := func(p *jen.Statement) *jen.Statement {
			return jen.Op("*").Parens(jen.Op("*").Id(rowType(z.RowBytes))).Parens(p)
		}
		move = cast(dst).Op("=").Add(cast(src))
	default:
		cast := func(p *jen.Statement) *jen.Statement {
			return jen.Op("*").Parens(jen.Op("*").Index(jen.Lit(z.RowBytes)).Byte()).Parens(p)
		}
		move = cast(dst).Op("=").Add(cast(src))
	}

	body := loop.Block(
		jen.Id("id").Op(":=").Op("*").Parens(jen.Op("*").Id(k.typ)).Parens(add("ids", idOff)),
		jen.If(jen.Id("id").Op("==").Lit(-1)).Block(jen.Continue()),
		jen.Id("at").Op(":=").Add(add("packed", packedOff)),
		jen.Id("row").Op(":=").Add(add("table", rowOff)),
		move,
	)

	name := loopName(d, k, z, strided)
	what := fmt.Sprintf("%d-byte rows", z.RowBytes)
	if anySize {
		what = "rows of rowBytes bytes"
	}
	if d.scatter {
		f.Commentf("%s copies n packed %s to the table rows named by %s ids", name, what, k.typ)
	} else {
		f.Commentf("%s copies the table rows named by n %s ids to packed %s", name, k.typ, what)
	}
	if strided {
		f.Comment("(packed rows stride bytes apart, ids idStride bytes apart); id -1 is skipped.")
	} else {
		f.Comment("(packed rows and ids back to back); id -1 is skipped.")
	}
	f.Func().Id(name).Params(params...).Block(body)
	f.Line()
}
