package probe

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/scatterkit/scatterkit/tools/cmd/scatterprof/internal/report"
)

// The kernel side, written with the asm package (no C toolchain).
//
// begin (entry of stage.begin.abi0): reads id and stage from the caller's
// stack (8(SP), 16(SP)), stores the time under the key {id, stage | tgid<<32}
// in the LRU hash "starts".
//
// end (entry of stage.end.abi0): takes the time first, reads id, stage and
// bytes (8(SP), 16(SP), 24(SP)), looks the key up, deletes it, subtracts the
// calibrated bias and adds the interval to the stage's per-CPU record:
// log2 histogram bucket, count, sum of nanoseconds, bytes.
//
// No per-event data leaves the kernel: user space reads the per-CPU
// records when it refreshes.

// Record layout of one stage in the per-CPU array "stages" (uint64 words).
const (
	wordCount = report.Buckets     // intervals recorded
	wordSum   = report.Buckets + 1 // their nanoseconds
	wordBytes = report.Buckets + 2 // the bytes their ends reported
	recWords  = report.Buckets + 4 // one spare word keeps the record 32-byte aligned
)

// Counter slots of the per-CPU array "counters" (one entry of nCounters words).
const (
	ctrBegins    = iota // begin probes that stored a start
	ctrEnds             // end probes that matched a begin
	ctrUnmatched        // end probes with no begin (attached mid-stage, or evicted)
	ctrReadErr          // probes that could not read the marker's arguments
	ctrBadStage         // probes with a stage number >= report.MaxStages
	ctrStoreErr         // begin probes whose start could not be stored
	nCounters
)

// Config slots of the array "config".
const (
	cfgBias = iota // nanoseconds subtracted from every interval
	nConfig
)

// ptRegsSP is the offset of sp in struct pt_regs on x86-64.
const ptRegsSP = 152

// startEntries bounds the stages open at once (per profiler, all targets).
const startEntries = 1 << 16

func mapSpecs() map[string]*ebpf.MapSpec {
	return map[string]*ebpf.MapSpec{
		"starts":   {Name: "sk_starts", Type: ebpf.LRUHash, KeySize: 16, ValueSize: 8, MaxEntries: startEntries},
		"stages":   {Name: "sk_stages", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: recWords * 8, MaxEntries: report.MaxStages},
		"counters": {Name: "sk_counters", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: nCounters * 8, MaxEntries: 1},
		"config":   {Name: "sk_config", Type: ebpf.Array, KeySize: 4, ValueSize: nConfig * 8, MaxEntries: 1},
	}
}

// count adds one to counter slot c. It clobbers R0-R5 and fp-40.
func count(c int, label string) asm.Instructions {
	return asm.Instructions{
		asm.StoreImm(asm.RFP, -40, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, 0).WithReference("counters"),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -40),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, label),
		asm.Mov.Imm(asm.R1, 1),
		asm.AddAtomic.Mem(asm.R0, asm.R1, asm.DWord, int16(c*8)),
		asm.Mov.Imm(asm.R0, 0).WithSymbol(label),
	}
}

// exitWith counts c and returns.
func exitWith(c int, sym, label string) asm.Instructions {
	ins := count(c, label)
	ins[0] = ins[0].WithSymbol(sym)
	return append(ins, asm.Return())
}

// readArgs reads n bytes of the marker's stack arguments (from 8(SP)) to
// fp+dst; on failure it jumps to "readerr".
func readArgs(dst int32, n int32) asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R3, asm.R6, ptRegsSP, asm.DWord),
		asm.Add.Imm(asm.R3, 8),
		asm.Mov.Reg(asm.R1, asm.RFP),
		asm.Add.Imm(asm.R1, dst),
		asm.Mov.Imm(asm.R2, n),
		asm.FnProbeReadUser.Call(),
		asm.JNE.Imm(asm.R0, 0, "readerr"),
	}
}

// stageKey checks the stage in R7 and turns the stage word at fp+off into
// stage | tgid<<32.
func stageKey(off int16) asm.Instructions {
	return asm.Instructions{
		asm.JGE.Imm(asm.R7, report.MaxStages, "badstage"),
		asm.FnGetCurrentPidTgid.Call(),
		asm.RSh.Imm(asm.R0, 32),
		asm.LSh.Imm(asm.R0, 32),
		asm.Or.Reg(asm.R0, asm.R7),
		asm.StoreMem(asm.RFP, off, asm.R0, asm.DWord),
	}
}

// beginProgram: stack fp-16 id, fp-8 stage (then the key's second word),
// fp-24 the start time.
func beginProgram() asm.Instructions {
	ins := asm.Instructions{asm.Mov.Reg(asm.R6, asm.R1)}
	ins = append(ins, readArgs(-16, 16)...)
	ins = append(ins, asm.LoadMem(asm.R7, asm.RFP, -8, asm.DWord))
	ins = append(ins, stageKey(-8)...)
	ins = append(ins,
		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(asm.RFP, -24, asm.R0, asm.DWord),
		asm.LoadMapPtr(asm.R1, 0).WithReference("starts"),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -16),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, -24),
		asm.Mov.Imm(asm.R4, 0), // BPF_ANY
		asm.FnMapUpdateElem.Call(),
		asm.JNE.Imm(asm.R0, 0, "storeerr"),
	)
	ins = append(ins, exitWith(ctrBegins, "ok", "ok_done")...)
	ins = append(ins, exitWith(ctrStoreErr, "storeerr", "storeerr_done")...)
	ins = append(ins, exitWith(ctrReadErr, "readerr", "readerr_done")...)
	ins = append(ins, exitWith(ctrBadStage, "badstage", "badstage_done")...)
	return ins
}

// endProgram: R8 the end time, then the interval; stack fp-24 id, fp-16
// stage (then the key's second word), fp-8 bytes; R7 the stage; R9 the
// bucket.
func endProgram() asm.Instructions {
	ins := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.FnKtimeGetNs.Call(),
		asm.Mov.Reg(asm.R8, asm.R0),
	}
	ins = append(ins, readArgs(-24, 24)...)
	ins = append(ins, asm.LoadMem(asm.R7, asm.RFP, -16, asm.DWord))
	ins = append(ins, stageKey(-16)...)
	ins = append(ins,
		asm.LoadMapPtr(asm.R1, 0).WithReference("starts"),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -24),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "unmatched"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Sub.Reg(asm.R8, asm.R1),
		asm.LoadMapPtr(asm.R1, 0).WithReference("starts"),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -24),
		asm.FnMapDeleteElem.Call(),

		// Subtract the calibrated bias, saturating at zero.
		asm.StoreImm(asm.RFP, -32, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, 0).WithReference("config"),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -32),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "bucket"),
		asm.LoadMem(asm.R1, asm.R0, cfgBias*8, asm.DWord),
		asm.JGT.Reg(asm.R8, asm.R1, "sub"),
		asm.Mov.Imm(asm.R8, 0),
		asm.Ja.Label("bucket"),
		asm.Sub.Reg(asm.R8, asm.R1).WithSymbol("sub"),

		// Bucket: below 4 ns the value itself; else 4*lg + next two bits.
		asm.Mov.Reg(asm.R9, asm.R8).WithSymbol("bucket"),
		asm.JLT.Imm(asm.R8, 4, "have"),
		asm.Mov.Reg(asm.R1, asm.R8),
		asm.Mov.Imm(asm.R9, 0),
	)
	for _, sh := range []int32{32, 16, 8, 4, 2, 1} {
		skip := fmt.Sprintf("lg%d", sh)
		ins = append(ins,
			asm.Mov.Reg(asm.R2, asm.R1),
			asm.RSh.Imm(asm.R2, sh),
			asm.JEq.Imm(asm.R2, 0, skip),
			asm.Mov.Reg(asm.R1, asm.R2),
			asm.Add.Imm(asm.R9, sh),
			asm.Mov.Reg(asm.R2, asm.R2).WithSymbol(skip), // no-op landing
		)
	}
	ins = append(ins,
		asm.Mov.Reg(asm.R2, asm.R9),
		asm.Sub.Imm(asm.R2, 2),
		asm.Mov.Reg(asm.R1, asm.R8),
		asm.RSh.Reg(asm.R1, asm.R2),
		asm.And.Imm(asm.R1, 3),
		asm.LSh.Imm(asm.R9, 2),
		asm.Add.Reg(asm.R9, asm.R1),
		asm.And.Imm(asm.R9, report.Buckets-1).WithSymbol("have"),

		// The stage's per-CPU record.
		asm.StoreMem(asm.RFP, -32, asm.R7, asm.Word),
		asm.LoadMapPtr(asm.R1, 0).WithReference("stages"),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -32),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "done"),
		asm.LSh.Imm(asm.R9, 3),
		asm.Mov.Reg(asm.R1, asm.R0),
		asm.Add.Reg(asm.R1, asm.R9),
		asm.Mov.Imm(asm.R2, 1),
		asm.AddAtomic.Mem(asm.R1, asm.R2, asm.DWord, 0),
		asm.AddAtomic.Mem(asm.R0, asm.R2, asm.DWord, wordCount*8),
		asm.AddAtomic.Mem(asm.R0, asm.R8, asm.DWord, wordSum*8),
		asm.LoadMem(asm.R3, asm.RFP, -8, asm.DWord),
		asm.AddAtomic.Mem(asm.R0, asm.R3, asm.DWord, wordBytes*8),
	)
	ins = append(ins, exitWith(ctrEnds, "done", "done_done")...)
	ins = append(ins, exitWith(ctrUnmatched, "unmatched", "unmatched_done")...)
	ins = append(ins, exitWith(ctrReadErr, "readerr", "readerr_done")...)
	ins = append(ins, exitWith(ctrBadStage, "badstage", "badstage_done")...)
	return ins
}

// collectionSpec is the whole kernel side.
func collectionSpec() *ebpf.CollectionSpec {
	return &ebpf.CollectionSpec{
		Maps: mapSpecs(),
		Programs: map[string]*ebpf.ProgramSpec{
			"begin": {Name: "sk_stage_begin", Type: ebpf.Kprobe, License: "GPL", Instructions: beginProgram()},
			"end":   {Name: "sk_stage_end", Type: ebpf.Kprobe, License: "GPL", Instructions: endProgram()},
		},
	}
}
