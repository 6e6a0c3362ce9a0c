package cudagather

import "fmt"

// DeviceCopy is one two-dimensional copy between device addresses: Rows
// rows of Width bytes, row i read at Src + i*SrcPitch and written at
// Dst + i*DstPitch (a reshard's Copy2D with its ranks' memory resolved).
// The addresses may be this process's allocations, another device's
// (peer access) or another process's opened with OpenIPC.
type DeviceCopy struct {
	Dst, Src           DevPtr
	DstPitch, SrcPitch int64
	Width, Rows        int64
}

// IPCHandle is a CUDA IPC memory handle (CUipcMemHandle): another process
// on the same host opens it (Context.OpenIPC) to address the exporting
// process's device allocation.
type IPCHandle [64]byte

// checkCopies validates copies: positive shapes, pitches at least the
// width when there is more than one row, no address range that wraps.
func checkCopies(cs []DeviceCopy) error {
	for i := range cs {
		c := &cs[i]
		bad := func(f string, a ...any) error {
			return &ArgError{Field: fmt.Sprintf("copies[%d]", i), Reason: fmt.Sprintf(f, a...)}
		}
		switch {
		case c.Width < 0 || c.Rows < 0 || c.DstPitch < 0 || c.SrcPitch < 0:
			return bad("%+v: negative", *c)
		case c.Width == 0 || c.Rows == 0:
			continue
		case c.Dst == 0 || c.Src == 0:
			return bad("nil address")
		case c.Rows > 1 && (c.DstPitch < c.Width || c.SrcPitch < c.Width):
			return bad("pitches %d and %d below the width %d", c.DstPitch, c.SrcPitch, c.Width)
		}
		for _, side := range [...]struct {
			p     DevPtr
			pitch int64
		}{{c.Dst, c.DstPitch}, {c.Src, c.SrcPitch}} {
			span, over := mul(c.Rows-1, side.pitch)
			if over || span > 1<<62 || c.Width > 1<<62 || uint64(side.p)+uint64(span)+uint64(c.Width) < uint64(side.p) {
				return bad("%d rows of %d B at pitch %d from %#x: past the address space", c.Rows, c.Width, side.pitch, uintptr(side.p))
			}
		}
	}
	return nil
}
