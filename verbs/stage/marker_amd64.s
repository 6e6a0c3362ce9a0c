#include "textflag.h"

// The markers load their arguments into registers and then run a 5-byte
// NOP, the probe point: a uprobe there reads AX, BX (and CX) from the
// registers it saved instead of copying the caller's stack, and the kernel
// emulates the NOP instead of single-stepping it. The exact bytes are part
// of the probe ABI (see doc.go); TestMarkersAreProbeable checks them.

// func begin(id, stage uint64)
TEXT ·begin(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ id+0(FP), AX
	MOVQ stage+8(FP), BX
	BYTE $0x0f; BYTE $0x1f; BYTE $0x44; BYTE $0x00; BYTE $0x00 // nopl 0x0(%rax,%rax,1)
	RET

// func end(id, stage, bytes uint64)
TEXT ·end(SB), NOSPLIT|NOFRAME, $0-24
	MOVQ id+0(FP), AX
	MOVQ stage+8(FP), BX
	MOVQ bytes+16(FP), CX
	BYTE $0x0f; BYTE $0x1f; BYTE $0x44; BYTE $0x00; BYTE $0x00
	RET

// func next(id, from, to, bytes uint64)
TEXT ·next(SB), NOSPLIT|NOFRAME, $0-32
	MOVQ id+0(FP), AX
	MOVQ from+8(FP), BX
	MOVQ bytes+24(FP), CX
	MOVQ to+16(FP), DX
	BYTE $0x0f; BYTE $0x1f; BYTE $0x44; BYTE $0x00; BYTE $0x00
	RET

// func markerPCs() (begin, end, next *byte): the entry addresses of the
// ABI0 markers.
TEXT ·markerPCs(SB), NOSPLIT|NOFRAME, $0-24
	LEAQ ·begin(SB), AX
	MOVQ AX, begin+0(FP)
	LEAQ ·end(SB), AX
	MOVQ AX, end+8(FP)
	LEAQ ·next(SB), AX
	MOVQ AX, next+16(FP)
	RET
