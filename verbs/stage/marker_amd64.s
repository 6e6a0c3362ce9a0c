#include "textflag.h"

// func begin(id, stage uint64)
TEXT ·begin(SB), NOSPLIT|NOFRAME, $0-16
	// 5-byte NOP (nopl 0x0(%rax,%rax,1)): the probe point.
	BYTE $0x0f; BYTE $0x1f; BYTE $0x44; BYTE $0x00; BYTE $0x00
	RET

// func end(id, stage, bytes uint64)
TEXT ·end(SB), NOSPLIT|NOFRAME, $0-24
	BYTE $0x0f; BYTE $0x1f; BYTE $0x44; BYTE $0x00; BYTE $0x00
	RET

// func markerPCs() (begin, end *byte): the entry addresses of the two
// ABI0 markers, for the test that checks the probe point.
TEXT ·markerPCs(SB), NOSPLIT|NOFRAME, $0-16
	LEAQ ·begin(SB), AX
	MOVQ AX, begin+0(FP)
	LEAQ ·end(SB), AX
	MOVQ AX, end+8(FP)
	RET
