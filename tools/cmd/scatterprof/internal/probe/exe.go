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
)

// nop5 is the markers' first instruction; a uprobe on it is emulated.
var nop5 = []byte{0x0f, 0x1f, 0x44, 0x00, 0x00}

// Markers describes the stage markers found in an executable.
type Markers struct {
	// Emulated reports that both markers start with the 5-byte NOP (the
	// cheap probe point); false means the probe single-steps.
	Emulated bool
	// Begin and End are the markers' file offsets: where the uprobes go.
	Begin, End uint64
}

// CheckExecutable opens an executable and checks that the profiler can
// attach to it: an x86-64 ELF with a symbol table holding both markers.
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
		if s.Name == BeginSymbol || s.Name == EndSymbol {
			found[s.Name] = s
		}
	}
	if len(found) != 2 {
		return Markers{}, &ExecError{Path: path, Err: ErrNoMarkers}
	}
	m := Markers{Emulated: true}
	for _, s := range found {
		off, head, err := textAt(f, s.Value, len(nop5))
		if err != nil {
			return Markers{}, &ExecError{Path: path, Err: fmt.Errorf("marker %s: %w", s.Name, err)}
		}
		m.Emulated = m.Emulated && bytes.Equal(head, nop5)
		if s.Name == BeginSymbol {
			m.Begin = off
		} else {
			m.End = off
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
