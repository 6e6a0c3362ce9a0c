package gather

import (
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/scatterkit/scatterkit/verbs"
	"github.com/scatterkit/scatterkit/verbs/internal/gatherwire"

	"github.com/scatterkit/scatterkit/planfmt"
)

// Defaults of the gather service's budgets (Config).
const (
	DefaultMaxCommands     = 64
	DefaultMemoryBudget    = 512 << 20
	DefaultProgressTimeout = 2 * time.Second
)

// keepStateBytes is the most storage a finished command's state may keep
// to be reused, and keepPoolBytes the most all kept states may hold
// together; a state past either is dropped (the GC takes it back), so a
// burst of huge commands does not stay resident after it.
const (
	keepStateBytes = 8 << 20
	keepPoolBytes  = 32 << 20
)

// commandCost is an upper bound, in bytes, of the memory a command takes
// while it runs, from what its header declares: the request itself, its
// decoded plan and normalization (FormRows: 8-byte ids; FormRanges: the
// ranges, their coalesced spans and runs and the overlap check's two sort
// buffers), the destination runs the service lists and one chunk's work
// requests (at most one per run), the completion spans, and a fixed 64 KiB
// for the command's goroutine, completion buffer and slots. Every
// fragment is counted, empty ones too: a plan of empty ranges costs what
// it occupies. TestCommandCostBound checks the bound against real
// footprints.
func commandCost(sh planfmt.CommandShape, msgLen int) int64 {
	const (
		rng  = int64(unsafe.Sizeof(planfmt.Range{}))
		span = int64(unsafe.Sizeof(planfmt.Span{}))
		run  = int64(unsafe.Sizeof(planfmt.Run{}))
		wr   = int64(unsafe.Sizeof(verbs.WorkRequest{}))
		sort = 2 * 16 // two dstSpan buffers
		comp = int64(unsafe.Sizeof(planfmt.Completion{}))
	)
	per := 8 + run + wr // rows: an id, a run and a request per fragment at worst
	if sh.Form == planfmt.FormRanges {
		per = rng + span + 2*run + sort + wr
	}
	return fixedCommandCost + int64(msgLen) + int64(sh.Fragments)*per + int64(sh.Completions+1)*comp
}

// fixedCommandCost is what any command costs besides its fragments.
const fixedCommandCost = 64 << 10

// admission bounds what the running commands of a service may cost the
// owner: how many run at once and the memory their decoded plans take.
// A command is admitted, or refused, before it is decoded.
type admission struct {
	mu       sync.Mutex
	commands int   // running
	bytes    int64 // charged to the running commands
	maxCmds  int
	budget   int64
	freed    chan struct{} // closed (and replaced) when a waiter should look again; nil: nobody waits
}

// admit charges a command of cost bytes, waiting up to wait for room. It
// fails with engine.GatherRefused for a command that could never fit and with
// engine.GatherExhausted when there was no room in time.
func (a *admission) admit(cost int64, wait time.Duration) error {
	if cost > a.budget {
		return &gatherwire.GatherError{Code: gatherwire.GatherRefused, Stage: "budget",
			Err: fmt.Errorf("command would take %d bytes of the owner's memory, its whole budget is %d: %w", cost, a.budget, verbs.ErrInvalid)}
	}
	var timer *time.Timer
	for {
		a.mu.Lock()
		if a.commands < a.maxCmds && a.bytes+cost <= a.budget {
			a.commands++
			a.bytes += cost
			a.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return nil
		}
		if a.freed == nil {
			a.freed = make(chan struct{})
		}
		freed := a.freed
		commands, bytes := a.commands, a.bytes
		a.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(wait)
		}
		select {
		case <-freed:
		case <-timer.C:
			return &gatherwire.GatherError{Code: gatherwire.GatherExhausted, Stage: "budget",
				Err: fmt.Errorf("%d commands running with %d of %d bytes; this one needs %d", commands, bytes, a.budget, cost)}
		}
	}
}

// release returns what admit charged.
func (a *admission) release(cost int64) {
	a.mu.Lock()
	a.commands--
	a.bytes -= cost
	if a.freed != nil {
		close(a.freed)
		a.freed = nil
	}
	a.mu.Unlock()
}

// usage returns the running commands and the bytes charged to them.
func (a *admission) usage() (int, int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.commands, a.bytes
}
