package probe

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
)

// The marker symbols (see package verbs/stage, "Probe ABI").
const (
	stagePkg    = "github.com/scatterkit/scatterkit/verbs/stage"
	BeginSymbol = stagePkg + ".begin.abi0"
	EndSymbol   = stagePkg + ".end.abi0"
	// NextSymbol is optional: the linker drops it from programs that never
	// call stage.Next.
	NextSymbol = stagePkg + ".next.abi0"
)

// The markers' code on amd64 (package verbs/stage, "Probe ABI"): the
// arguments moved into AX, BX (and CX), then the 5-byte NOP where the
// uprobe goes, then RET.
var (
	beginCode = []byte{0x48, 0x8b, 0x44, 0x24, 0x08, 0x48, 0x8b, 0x5c, 0x24, 0x10,
		0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3}
	endCode = []byte{0x48, 0x8b, 0x44, 0x24, 0x08, 0x48, 0x8b, 0x5c, 0x24, 0x10, 0x48, 0x8b, 0x4c, 0x24, 0x18,
		0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3}
	nextCode = []byte{0x48, 0x8b, 0x44, 0x24, 0x08, 0x48, 0x8b, 0x5c, 0x24, 0x10, 0x48, 0x8b, 0x4c, 0x24, 0x20,
		0x48, 0x8b, 0x54, 0x24, 0x18, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3}
)

// Probe points inside the markers: the NOP after the argument moves.
const (
	beginProbe = 10
	endProbe   = 15
	nextProbe  = 20
)

// Markers locates the stage markers' probe points in an executable.
type Markers struct {
	// Begin, End and Next are the file offsets of the probe points: where
	// the uprobes go. Next is 0 when the executable has no next marker.
	Begin, End, Next uint64
}

// codeFor returns the expected code and probe offset of a marker symbol.
func codeFor(sym string) ([]byte, uint64) {
	switch sym {
	case BeginSymbol:
		return beginCode, beginProbe
	case EndSymbol:
		return endCode, endProbe
	}
	return nextCode, nextProbe
}

// CheckExecutable opens an executable and checks that the profiler can
// attach to it: an x86-64 ELF with a symbol table holding the begin and
// end markers (and perhaps next), each with the code of the probe ABI.
// It returns an *ExecError wrapping ErrStripped or ErrNoMarkers otherwise.
func CheckExecutable(path string) (Markers, error) {
	f, err := elf.Open(path)
	if err != nil {
		return Markers{}, &ExecError{Path: path, Err: fmt.Errorf("not an ELF executable: %w", err)}
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		return Markers{}, &ExecError{Path: path, Err: fmt.Errorf("machine %v: %w", f.Machine, ErrNotSupported)}
	}
	syms, err := f.Symbols()
	if errors.Is(err, elf.ErrNoSymbols) || f.Section(".symtab") == nil {
		return Markers{}, &ExecError{Path: path, Err: ErrStripped}
	}
	if err != nil {
		return Markers{}, &ExecError{Path: path, Err: fmt.Errorf("symbol table: %w", err)}
	}
	found := map[string]elf.Symbol{}
	for _, s := range syms {
		if s.Name == BeginSymbol || s.Name == EndSymbol || s.Name == NextSymbol {
			found[s.Name] = s
		}
	}
	if found[BeginSymbol].Name == "" || found[EndSymbol].Name == "" {
		return Markers{}, &ExecError{Path: path, Err: ErrNoMarkers}
	}
	var m Markers
	for _, s := range found {
		want, probe := codeFor(s.Name)
		off, code, err := textAt(f, s.Value, len(want))
		if err != nil {
			return Markers{}, &ExecError{Path: path, Err: fmt.Errorf("marker %s: %w", s.Name, err)}
		}
		if !bytes.Equal(code, want) {
			return Markers{}, &ExecError{Path: path, Err: fmt.Errorf("marker %s: code % x: %w", s.Name, code, ErrMarkerABI)}
		}
		switch s.Name {
		case BeginSymbol:
			m.Begin = off + probe
		case EndSymbol:
			m.End = off + probe
		default:
			m.Next = off + probe
		}
	}
	return m, nil
}

// textAt finds a virtual address in the executable segment holding it and
// returns its file offset and the n bytes there.
func textAt(f *elf.File, addr uint64, n int) (uint64, []byte, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 || addr < p.Vaddr || addr+uint64(n) > p.Vaddr+p.Filesz {
			continue
		}
		b := make([]byte, n)
		if _, err := p.ReadAt(b, int64(addr-p.Vaddr)); err != nil {
			return 0, nil, err
		}
		return addr - p.Vaddr + p.Off, b, nil
	}
	return 0, nil, fmt.Errorf("address %#x is in no executable segment", addr)
}
