#include "textflag.h"

// func Lines(p unsafe.Pointer, n uintptr)
// PREFETCHT0 on every 64-byte line of [p, p+n) (one line at least). A
// prefetch is a hint: it never faults, whatever the address.
TEXT ·Lines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	// From the line that holds p: n grows by p's offset in it.
	MOVQ AX, DX
	ANDQ $63, DX
	ADDQ DX, CX
	ANDQ $-64, AX
loop:
	PREFETCHT0 (AX)
	ADDQ $64, AX
	SUBQ $64, CX
	JA   loop
	RET
