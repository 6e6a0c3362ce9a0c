// Package stage holds the engine's stage markers: tiny functions that the
// transfer engine calls once per operation or per chunk (never per fragment)
// at the boundaries of its stages, so that an external profiler
// (tools/cmd/scatterprof) can attach entry uprobes to them and time each
// stage without any instrumentation in the hot path.
//
// A marker does nothing. On amd64 each one is an assembly function whose
// first instruction is a 5-byte NOP, the cheapest instruction for a uprobe to
// emulate (see ../shared/MACHINE.md: 0.8 us per hit versus 5-6 us when the
// first instruction must be single-stepped); elsewhere it is an empty
// non-inlined Go function. Unprobed, a marker costs one call.
//
// # Probe ABI
//
// Begin and End are inlined into their callers, which call the markers
// begin and end directly. On amd64 these are ABI0 assembly functions whose
// ELF symbols are github.com/scatterkit/scatterkit/verbs/stage.begin.abi0 and
// .end.abi0 (the linker's suffix for ABI0 text symbols); elsewhere the
// symbols carry no suffix. On amd64, at entry the return address is at 0(SP)
// and the arguments follow on the stack, 8 bytes each:
//
//	begin: 8(SP) op id (uint64), 16(SP) stage (uint64)
//	end:   8(SP) op id (uint64), 16(SP) stage (uint64), 24(SP) bytes (uint64)
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
