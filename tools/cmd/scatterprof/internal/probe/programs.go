package probe

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/scatterkit/scatterkit/tools/cmd/scatterprof/internal/report"
)

// The kernel side, written with the asm package (no C toolchain).
//
// The programs sit on the markers' probe points, where the marker has moved
// its arguments into registers (package verbs/stage, "Probe ABI"): AX the
// op id, BX the stage (next: the stage that ends), CX the bytes, DX (next)
// the stage that begins. They read them from the saved registers; nothing
// is copied from user memory.
//
// begin: takes the time last and stores {id, stage | tgid<<32, time} in
// the set of the array "starts" that the key hashes to (a set is one cache
// line of two ways): in the way already holding the key, else a free way,
// else it replaces the first and counts a store error.
//
// end: takes the time first and looks for the key in its set; where a way
// holds it, it frees the way, subtracts the calibrated bias (kept in the
// stage's record) and adds the interval to the stage's per-CPU record:
// log2 histogram bucket, count, sum of nanoseconds, bytes, each times the
// interval's weight (a sampled chunk stands for several; the stage word's
// upper half), and one probed interval. A key in neither way (attached
// mid-stage, or its start replaced) counts as unmatched.
//
// next: end of one stage and begin of the next at one time, in one probe
// hit; the ended stage's record counts it.
//
// A probe runs inside an operation whose data has just swept the caches,
// so what it costs there is mostly the cache lines it touches: a begin
// touches one line of "starts", an end that line and two of its stage's
// record (the histogram bucket, and the totals with the bias). Matched
// begins and ends are not counted separately (the records' counts imply
// them); only what went wrong is, in "counters". Every map access is an
// array lookup, which the verifier inlines: no locks, no allocation. No
// per-event data leaves the kernel: user space reads the per-CPU records
// when it refreshes.

// Record layout of one stage in the per-CPU array "stages" (uint64 words):
// the histogram, then one line of totals.
const (
	wordCount  = report.Buckets     // intervals recorded
	wordSum    = report.Buckets + 1 // their nanoseconds
	wordBytes  = report.Buckets + 2 // the bytes their ends reported
	wordBias   = report.Buckets + 3 // nanoseconds subtracted from every interval (set by calibration)
	wordNexts  = report.Buckets + 4 // intervals ended by a next probe
	wordProbes = report.Buckets + 5 // intervals probed (count holds their weights)
	recWords   = report.Buckets + 8 // the totals fill one 64-byte line
)

// Counter slots of the per-CPU array "counters" (one entry of nCounters
// words): the events that went wrong.
const (
	ctrUnmatched = iota // end probes whose begin was not found (attached mid-stage, or its start replaced)
	ctrBadStage         // probes with a stage number >= report.MaxStages
	ctrStoreErr         // begin probes that found both ways of their set taken and replaced one
	nCounters
)

// Offsets in struct pt_regs on x86-64 of the registers the markers load.
const (
	ptRegsBX = 40
	ptRegsAX = 80
	ptRegsCX = 88
	ptRegsDX = 96
)

// Stack slots of the programs (offsets from the frame pointer).
const (
	fpKey      = -8  // a map key (uint32)
	fpNow      = -24 // the probe's time
	fpReplaced = -32 // begin: a way was taken over (uint32)
	fpWeight   = -40 // end: the interval's weight (the stage word's upper half)
)

// Open stages live in a table of 2^setBits sets of two ways; a way is
// wayWords words: id, stage | tgid<<32 (0 when free), start time, spare.
// A set is one 64-byte cache line: a probe touches one line. The table
// (128 KiB) stays small so that its lines stay in cache.
const (
	setBits  = 11
	wayWords = 4
	// setMul mixes a key into its set (Fibonacci hashing).
	setMul = -7046029254386353131 // 0x9E3779B97F4A7C15 as int64
)

func mapSpecs() map[string]*ebpf.MapSpec {
	return map[string]*ebpf.MapSpec{
		"starts":   {Name: "sk_starts", Type: ebpf.Array, KeySize: 4, ValueSize: 2 * wayWords * 8, MaxEntries: 1 << setBits},
		"stages":   {Name: "sk_stages", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: recWords * 8, MaxEntries: report.MaxStages},
		"counters": {Name: "sk_counters", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: nCounters * 8, MaxEntries: 1},
	}
}

// count adds one to counter slot c and falls through to label. It clobbers
// R0-R5 and the key slot.
func count(c int, label string) asm.Instructions {
	ins := asm.Instructions{asm.StoreImm(asm.RFP, fpKey, 0, asm.Word)}
	ins = append(ins, lookup("counters", label)...)
	return append(ins,
		asm.Mov.Imm(asm.R1, 1),
		asm.AddAtomic.Mem(asm.R0, asm.R1, asm.DWord, int16(c*8)),
		asm.Mov.Imm(asm.R0, 0).WithSymbol(label),
	)
}

// lookup leaves in R0 a pointer to the element of the named map whose
// (uint32) key is at fpKey, or jumps to onNull. It clobbers R1-R5.
func lookup(name, onNull string) asm.Instructions {
	return asm.Instructions{
		asm.LoadMapPtr(asm.R1, 0).WithReference(name),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, fpKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, onNull),
	}
}

// countThen counts c under the symbol sym and jumps to next.
func countThen(c int, sym, next string) asm.Instructions {
	ins := count(c, sym+"_counted")
	ins[0] = ins[0].WithSymbol(sym)
	return append(ins, asm.Ja.Label(next))
}

// keySet loads the op id into R7 and the stage word (from the saved
// register at stageReg) into R8, keeps the word's upper half (an end's
// weight) at fpWeight, checks the stage (else jumps to pfx+"badstage"),
// turns R8 into stage | tgid<<32, and leaves in R0 a pointer to the key's
// set (or jumps to pfx+"out" if the lookup fails). It clobbers R1-R5 and
// the key slot.
func keySet(pfx string, stageReg int16) asm.Instructions {
	ins := asm.Instructions{
		asm.LoadMem(asm.R7, asm.R6, ptRegsAX, asm.DWord),
		asm.LoadMem(asm.R8, asm.R6, stageReg, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.R8),
		asm.RSh.Imm(asm.R1, 32),
		asm.StoreMem(asm.RFP, fpWeight, asm.R1, asm.DWord),
		asm.LSh.Imm(asm.R8, 32),
		asm.RSh.Imm(asm.R8, 32),
		asm.JGE.Imm(asm.R8, report.MaxStages, pfx+"badstage"),
		asm.FnGetCurrentPidTgid.Call(),
		asm.RSh.Imm(asm.R0, 32),
		asm.LSh.Imm(asm.R0, 32),
		asm.Or.Reg(asm.R8, asm.R0),
		// set = ((id ^ key2*mul) * mul) >> (64 - setBits)
		asm.LoadImm(asm.R1, setMul, asm.DWord),
		asm.Mov.Reg(asm.R2, asm.R8),
		asm.Mul.Reg(asm.R2, asm.R1),
		asm.Xor.Reg(asm.R2, asm.R7),
		asm.Mul.Reg(asm.R2, asm.R1),
		asm.RSh.Imm(asm.R2, 64-setBits),
		asm.StoreMem(asm.RFP, fpKey, asm.R2, asm.Word),
	}
	return append(ins, lookup("starts", pfx+"out")...)
}

// beginPart stores the start of the stage in the saved register stageReg.
// With stamp it takes the time itself (last, after the lookup); else it
// uses the time at fpNow. It ends at pfx+"out".
func beginPart(pfx string, stageReg int16, stamp bool) asm.Instructions {
	ins := keySet(pfx, stageReg)
	ins = append(ins,
		// R9: the way already holding this key (a stage begun again
		// before it ended starts over), else the first free way, else
		// the first way (counted).
		asm.Mov.Reg(asm.R9, asm.R0),
		asm.LoadMem(asm.R1, asm.R9, 8, asm.DWord),
		asm.JNE.Reg(asm.R1, asm.R8, pfx+"same1"),
		asm.LoadMem(asm.R1, asm.R9, 0, asm.DWord),
		asm.JEq.Reg(asm.R1, asm.R7, pfx+"fresh"),
		asm.LoadMem(asm.R1, asm.R9, wayWords*8+8, asm.DWord).WithSymbol(pfx+"same1"),
		asm.JNE.Reg(asm.R1, asm.R8, pfx+"free"),
		asm.LoadMem(asm.R1, asm.R9, wayWords*8, asm.DWord),
		asm.JNE.Reg(asm.R1, asm.R7, pfx+"free"),
		asm.Add.Imm(asm.R9, wayWords*8),
		asm.Ja.Label(pfx+"fresh"),
		asm.LoadMem(asm.R1, asm.R9, 8, asm.DWord).WithSymbol(pfx+"free"),
		asm.JEq.Imm(asm.R1, 0, pfx+"fresh"),
		asm.Add.Imm(asm.R9, wayWords*8),
		asm.LoadMem(asm.R1, asm.R9, 8, asm.DWord),
		asm.JEq.Imm(asm.R1, 0, pfx+"fresh"),
		asm.Mov.Reg(asm.R9, asm.R0),
		asm.StoreImm(asm.RFP, fpReplaced, 1, asm.Word),
		asm.Ja.Label(pfx+"stamp"),
		asm.StoreImm(asm.RFP, fpReplaced, 0, asm.Word).WithSymbol(pfx+"fresh"),
	)
	if stamp {
		ins = append(ins,
			asm.FnKtimeGetNs.Call().WithSymbol(pfx+"stamp"),
			asm.StoreMem(asm.RFP, fpNow, asm.R0, asm.DWord),
		)
	} else {
		ins = append(ins, asm.LoadMem(asm.R0, asm.RFP, fpNow, asm.DWord).WithSymbol(pfx+"stamp"))
	}
	ins = append(ins,
		asm.StoreMem(asm.R9, 0, asm.R7, asm.DWord),
		asm.StoreMem(asm.R9, 16, asm.R0, asm.DWord),
		asm.StoreMem(asm.R9, 8, asm.R8, asm.DWord),
		asm.LoadMem(asm.R1, asm.RFP, fpReplaced, asm.Word),
		asm.JEq.Imm(asm.R1, 0, pfx+"out"),
	)
	ins = append(ins, countThen(ctrStoreErr, pfx+"replaced", pfx+"out")...)
	ins = append(ins, countThen(ctrBadStage, pfx+"badstage", pfx+"out")...)
	return append(ins, asm.Mov.Imm(asm.R0, 0).WithSymbol(pfx+"out"))
}

// endPart records the stage in the saved register stageReg as ending at
// fpNow with the bytes in the saved register bytesReg; with next it also
// counts the interval as ended by a next probe. It ends at pfx+"out". R9
// holds the interval, R7 becomes the bucket, R0 the stage's record.
func endPart(pfx string, stageReg, bytesReg int16, next bool) asm.Instructions {
	ins := keySet(pfx, stageReg)
	ins = append(ins,
		// R0: the way holding the key.
		asm.LoadMem(asm.R1, asm.R0, 8, asm.DWord),
		asm.JNE.Reg(asm.R1, asm.R8, pfx+"way1"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.JEq.Reg(asm.R1, asm.R7, pfx+"found"),
		asm.Add.Imm(asm.R0, wayWords*8).WithSymbol(pfx+"way1"),
		asm.LoadMem(asm.R1, asm.R0, 8, asm.DWord),
		asm.JNE.Reg(asm.R1, asm.R8, pfx+"unmatched"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.JNE.Reg(asm.R1, asm.R7, pfx+"unmatched"),
		asm.LoadMem(asm.R1, asm.R0, 16, asm.DWord).WithSymbol(pfx+"found"),
		asm.Mov.Imm(asm.R2, 0),
		asm.StoreMem(asm.R0, 8, asm.R2, asm.DWord), // free the way
		asm.LoadMem(asm.R9, asm.RFP, fpNow, asm.DWord),
		asm.Sub.Reg(asm.R9, asm.R1),

		// The stage's per-CPU record (the stage is R8's low word).
		asm.StoreMem(asm.RFP, fpKey, asm.R8, asm.Word),
	)
	ins = append(ins, lookup("stages", pfx+"out")...)
	ins = append(ins,
		// Subtract the calibrated bias, saturating at zero.
		asm.LoadMem(asm.R1, asm.R0, wordBias*8, asm.DWord),
		asm.JGT.Reg(asm.R9, asm.R1, pfx+"sub"),
		asm.Mov.Imm(asm.R9, 0),
		asm.Ja.Label(pfx+"bucket"),
		asm.Sub.Reg(asm.R9, asm.R1).WithSymbol(pfx+"sub"),

		// R7 becomes the bucket: below 4 ns the value itself, else
		// 4*lg + the next two bits.
		asm.Mov.Reg(asm.R7, asm.R9).WithSymbol(pfx+"bucket"),
		asm.JLT.Imm(asm.R9, 4, pfx+"have"),
		asm.Mov.Reg(asm.R1, asm.R9),
		asm.Mov.Imm(asm.R7, 0),
	)
	for _, sh := range []int32{32, 16, 8, 4, 2, 1} {
		skip := fmt.Sprintf("%slg%d", pfx, sh)
		ins = append(ins,
			asm.Mov.Reg(asm.R2, asm.R1),
			asm.RSh.Imm(asm.R2, sh),
			asm.JEq.Imm(asm.R2, 0, skip),
			asm.Mov.Reg(asm.R1, asm.R2),
			asm.Add.Imm(asm.R7, sh),
			asm.Mov.Reg(asm.R2, asm.R2).WithSymbol(skip), // no-op landing
		)
	}
	ins = append(ins,
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.Sub.Imm(asm.R2, 2),
		asm.Mov.Reg(asm.R1, asm.R9),
		asm.RSh.Reg(asm.R1, asm.R2),
		asm.And.Imm(asm.R1, 3),
		asm.LSh.Imm(asm.R7, 2),
		asm.Add.Reg(asm.R7, asm.R1),
		asm.And.Imm(asm.R7, report.Buckets-1).WithSymbol(pfx+"have"),

		// R2: the weight, at least 1; the interval counts that many
		// times, its time and bytes that many times over.
		asm.LoadMem(asm.R2, asm.RFP, fpWeight, asm.DWord),
		asm.JNE.Imm(asm.R2, 0, pfx+"weighed"),
		asm.Mov.Imm(asm.R2, 1),
		asm.LSh.Imm(asm.R7, 3).WithSymbol(pfx+"weighed"),
		asm.Mov.Reg(asm.R1, asm.R0),
		asm.Add.Reg(asm.R1, asm.R7),
		asm.AddAtomic.Mem(asm.R1, asm.R2, asm.DWord, 0),
		asm.AddAtomic.Mem(asm.R0, asm.R2, asm.DWord, wordCount*8),
		asm.Mul.Reg(asm.R9, asm.R2),
		asm.AddAtomic.Mem(asm.R0, asm.R9, asm.DWord, wordSum*8),
		asm.LoadMem(asm.R3, asm.R6, bytesReg, asm.DWord),
		asm.Mul.Reg(asm.R3, asm.R2),
		asm.AddAtomic.Mem(asm.R0, asm.R3, asm.DWord, wordBytes*8),
		asm.Mov.Imm(asm.R2, 1),
		asm.AddAtomic.Mem(asm.R0, asm.R2, asm.DWord, wordProbes*8),
	)
	if next {
		ins = append(ins, asm.AddAtomic.Mem(asm.R0, asm.R2, asm.DWord, wordNexts*8))
	}
	ins = append(ins, asm.Ja.Label(pfx+"out"))
	ins = append(ins, countThen(ctrUnmatched, pfx+"unmatched", pfx+"out")...)
	ins = append(ins, countThen(ctrBadStage, pfx+"badstage", pfx+"out")...)
	return append(ins, asm.Mov.Imm(asm.R0, 0).WithSymbol(pfx+"out"))
}

// stamp saves the context and takes the time first.
func stamp() asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(asm.RFP, fpNow, asm.R0, asm.DWord),
	}
}

func beginProgram() asm.Instructions {
	ins := asm.Instructions{asm.Mov.Reg(asm.R6, asm.R1)}
	ins = append(ins, beginPart("b_", ptRegsBX, true)...)
	return append(ins, asm.Return())
}

func endProgram() asm.Instructions {
	ins := append(stamp(), endPart("e_", ptRegsBX, ptRegsCX, false)...)
	return append(ins, asm.Return())
}

func nextProgram() asm.Instructions {
	ins := append(stamp(), endPart("e_", ptRegsBX, ptRegsCX, true)...)
	ins = append(ins, beginPart("b_", ptRegsDX, false)...)
	return append(ins, asm.Return())
}

// collectionSpec is the whole kernel side.
func collectionSpec() *ebpf.CollectionSpec {
	return &ebpf.CollectionSpec{
		Maps: mapSpecs(),
		Programs: map[string]*ebpf.ProgramSpec{
			"begin": {Name: "sk_stage_begin", Type: ebpf.Kprobe, License: "GPL", Instructions: beginProgram()},
			"end":   {Name: "sk_stage_end", Type: ebpf.Kprobe, License: "GPL", Instructions: endProgram()},
			"next":  {Name: "sk_stage_next", Type: ebpf.Kprobe, License: "GPL", Instructions: nextProgram()},
		},
	}
}
