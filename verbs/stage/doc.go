// Package stage holds the engine's stage markers: tiny functions that the
// transfer engine calls once per operation or per chunk (never per fragment)
// at the boundaries of its stages, so that an external profiler
// (tools/cmd/scatterprof) can attach entry uprobes to them and time each
// stage without any instrumentation in the hot path.
//
// A marker does nothing. On amd64 each one is an assembly function that
// loads its arguments into registers and runs a 5-byte NOP, the probe point,
// the cheapest instruction for a uprobe to emulate (see ../shared/MACHINE.md:
// 0.8 us per hit versus 5-6 us when the instruction must be single-stepped);
// elsewhere it is an empty non-inlined Go function. Unprobed, a marker costs
// one call and a few moves.
//
// # Probe ABI
//
// Begin and End are inlined into their callers, which call the markers
// begin and end directly. On amd64 these are ABI0 assembly functions whose
// ELF symbols are github.com/scatterkit/scatterkit/verbs/stage.begin.abi0,
// .end.abi0 and .next.abi0 (the linker's suffix for ABI0 text symbols; the
// linker drops next from programs that never call Next); elsewhere the
// symbols carry no suffix. On amd64 their code is exactly
//
//	begin: 48 8b 44 24 08    MOVQ 8(SP), AX    op id
//	       48 8b 5c 24 10    MOVQ 16(SP), BX   stage
//	       0f 1f 44 00 00    NOPL              probe point, symbol + 10
//	       c3                RET
//	end:   48 8b 44 24 08    MOVQ 8(SP), AX    op id
//	       48 8b 5c 24 10    MOVQ 16(SP), BX   stage
//	       48 8b 4c 24 18    MOVQ 24(SP), CX   bytes
//	       0f 1f 44 00 00    NOPL              probe point, symbol + 15
//	       c3                RET
//	next:  48 8b 44 24 08    MOVQ 8(SP), AX    op id
//	       48 8b 5c 24 10    MOVQ 16(SP), BX   the stage that ends
//	       48 8b 4c 24 20    MOVQ 32(SP), CX   its bytes
//	       48 8b 54 24 18    MOVQ 24(SP), DX   the stage that begins
//	       0f 1f 44 00 00    NOPL              probe point, symbol + 20
//	       c3                RET
//
// so a uprobe on the NOP finds the arguments in the registers it saved (ax,
// bx, cx, dx of struct pt_regs). A profiler checks these bytes before it
// attaches; changing them is a change of the ABI.
//
// The stage argument of end and next (the ended stage) carries in its
// upper 32 bits the weight of a sampled interval (EndWeighted,
// NextWeighted; 0 and 1 mean one): it stands for that many intervals of
// its stage. Chunk stages are sampled (ChunkSample), so that an operation
// carries the markers of at most MaxMarkedChunks chunks.
//
// A begin and its end are matched by the explicit pair (op id, stage), never
// by the thread: stages of one operation run on several goroutines. Chunk
// stages use the chunk's own id (see ChunkID) so that chunks of one
// operation in flight at once do not collide. The engine draws operation
// ids, and the gather service the ids of the commands it serves, from one
// process-wide counter, so the pair is unique within a process; a profiler
// of several processes adds the process to the key.
//
// Entries gives the markers' addresses in the running process, for a
// profiler that probes itself (the symbol table may be stripped).
package stage
