package faultproxy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Kind is what a Fault does to the forwarded streams.
type Kind uint8

const (
	// Pass forwards everything unchanged.
	Pass Kind = iota
	// Delay holds each chunk for Fault.Delay.
	Delay
	// Stall stops forwarding in Fault.Dir, keeping the sockets open.
	Stall
	// Partition stops forwarding both ways and holds new connections.
	Partition
	// Reset closes every connection with a TCP RST.
	Reset
	// Corrupt flips bits of chosen or random bytes of the stream.
	Corrupt
)

var kindNames = [...]string{Pass: "pass", Delay: "delay", Stall: "stall", Partition: "partition", Reset: "reset", Corrupt: "corrupt"}

// String returns the kind's name ("stall").
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Dir selects the directions a fault applies to.
type Dir uint8

const (
	// Up is client to target.
	Up Dir = 1 << iota
	// Down is target to client.
	Down
	// Both is Up and Down; a zero Dir means Both.
	Both = Up | Down
)

// String returns "up", "down" or "both".
func (d Dir) String() string {
	switch d {
	case Up:
		return "up"
	case Down:
		return "down"
	case Both, 0:
		return "both"
	}
	return fmt.Sprintf("dir(%d)", uint8(d))
}

// Fault is what the proxy does to the bytes it forwards. The zero value is
// Pass. Fields a kind does not use must be zero.
type Fault struct {
	Kind Kind
	// Dir is where the fault applies (zero: Both). Partition is always
	// both ways.
	Dir Dir
	// Delay (Delay) is how long each chunk is held.
	Delay time.Duration
	// For (Stall, Partition) is how long forwarding stops, from Set; zero
	// means until the next Set or Heal.
	For time.Duration
	// After (Reset, Corrupt) is the bytes forwarded in Dir since Set
	// before the fault strikes: a reset once After bytes went through
	// (After and At both zero: at once, in Set; After zero with At set: by
	// time alone), the first offset a corruption may hit.
	After int64
	// At (Reset) resets this long after Set when After bytes have not
	// gone through by then (zero: by bytes only).
	At time.Duration
	// Flips (Corrupt) is how many bytes to corrupt (0: 1) at distinct
	// random offsets in [After, After+Span); Span 0 means the single
	// offset After.
	Flips int
	Span  int64
	// Offsets (Corrupt), when set, are the stream offsets (from Set) to
	// corrupt instead of random ones; After, Flips and Span must then be
	// zero.
	Offsets []int64
}

// String describes the fault on one line.
func (f Fault) String() string {
	d := f.dir()
	switch f.Kind {
	case Pass:
		return "pass"
	case Delay:
		return fmt.Sprintf("delay %s %v", d, f.Delay)
	case Stall, Partition:
		s := fmt.Sprintf("%s %s", f.Kind, d)
		if f.Kind == Partition {
			s = "partition"
		}
		if f.For > 0 {
			return fmt.Sprintf("%s for %v", s, f.For)
		}
		return s + " until healed"
	case Reset:
		s := fmt.Sprintf("reset %s after %d B", d, f.After)
		if f.At > 0 {
			s += fmt.Sprintf(" or %v", f.At)
		}
		return s
	case Corrupt:
		if f.Offsets != nil {
			return fmt.Sprintf("corrupt %s at %v", d, f.Offsets)
		}
		span := max(f.Span, 1)
		return fmt.Sprintf("corrupt %s %d B in [%d,+%d)", d, max(f.Flips, 1), f.After, span)
	}
	return f.Kind.String()
}

func (f Fault) dir() Dir {
	if f.Dir == 0 || f.Kind == Partition {
		return Both
	}
	return f.Dir
}

// check validates f.
func (f Fault) check() error {
	bad := func(field, reason string) error { return &FaultError{Kind: f.Kind, Field: field, Reason: reason} }
	if f.Dir&^Both != 0 {
		return bad("Dir", fmt.Sprintf("%d: unknown bits", f.Dir))
	}
	unused := func(fields ...string) error {
		for _, name := range fields {
			nonZero := false
			switch name {
			case "Delay":
				nonZero = f.Delay != 0
			case "For":
				nonZero = f.For != 0
			case "After":
				nonZero = f.After != 0
			case "At":
				nonZero = f.At != 0
			case "Flips":
				nonZero = f.Flips != 0
			case "Span":
				nonZero = f.Span != 0
			case "Offsets":
				nonZero = f.Offsets != nil
			}
			if nonZero {
				return bad(name, "not used by this kind")
			}
		}
		return nil
	}
	switch f.Kind {
	case Pass:
		if f.Dir != 0 {
			return bad("Dir", "not used by this kind")
		}
		return unused("Delay", "For", "After", "At", "Flips", "Span", "Offsets")
	case Delay:
		if f.Delay <= 0 {
			return bad("Delay", fmt.Sprintf("%v: must be positive", f.Delay))
		}
		return unused("For", "After", "At", "Flips", "Span", "Offsets")
	case Stall, Partition:
		if f.For < 0 {
			return bad("For", fmt.Sprintf("%v: negative", f.For))
		}
		if f.Kind == Partition && f.Dir != 0 && f.Dir != Both {
			return bad("Dir", "a partition stops both directions")
		}
		return unused("Delay", "After", "At", "Flips", "Span", "Offsets")
	case Reset:
		if f.After < 0 {
			return bad("After", fmt.Sprintf("%d: negative", f.After))
		}
		if f.At < 0 {
			return bad("At", fmt.Sprintf("%v: negative", f.At))
		}
		return unused("Delay", "For", "Flips", "Span", "Offsets")
	case Corrupt:
		if err := unused("Delay", "For", "At"); err != nil {
			return err
		}
		if f.Offsets != nil {
			if len(f.Offsets) == 0 {
				return bad("Offsets", "empty")
			}
			if err := unused("After", "Flips", "Span"); err != nil {
				return err
			}
			for _, o := range f.Offsets {
				if o < 0 {
					return bad("Offsets", fmt.Sprintf("%d: negative", o))
				}
			}
			return nil
		}
		switch {
		case f.After < 0:
			return bad("After", fmt.Sprintf("%d: negative", f.After))
		case f.Flips < 0:
			return bad("Flips", fmt.Sprintf("%d: negative", f.Flips))
		case f.Span < 0:
			return bad("Span", fmt.Sprintf("%d: negative", f.Span))
		case int64(max(f.Flips, 1)) > max(f.Span, 1):
			return bad("Flips", fmt.Sprintf("%d distinct offsets do not fit a span of %d", f.Flips, max(f.Span, 1)))
		case f.Flips > 1<<20:
			return bad("Flips", fmt.Sprintf("%d: at most %d", f.Flips, 1<<20))
		}
		return nil
	}
	return bad("Kind", "unknown")
}

// flip is one corrupted byte: its offset in a direction's stream and the
// mask XORed into it.
type flip struct {
	off  int64
	mask byte
}

// flips draws the corruption of one direction from r.
func (f Fault) flips(r *rand.Rand) []flip {
	var offs []int64
	if f.Offsets != nil {
		offs = slices.Clone(f.Offsets)
		slices.Sort(offs)
		offs = slices.Compact(offs)
	} else {
		n, span := int64(max(f.Flips, 1)), max(f.Span, 1)
		seen := make(map[int64]bool, n)
		for int64(len(offs)) < n {
			o := f.After + r.Int64N(span)
			if !seen[o] {
				seen[o] = true
				offs = append(offs, o)
			}
		}
		slices.Sort(offs)
	}
	out := make([]flip, len(offs))
	for i, o := range offs {
		out[i] = flip{off: o, mask: byte(1 + r.IntN(255))}
	}
	return out
}
