// Package cudagather gathers fixed-size byte rows into device memory on a
// CUDA stream: the CUDA half of scatterkit's Engram lookups. Tables are
// either host memory registered with the driver and mapped into the
// device's address space (zero-copy: rows cross PCIe as the kernel reads
// them; an mmap'd snapshot is registered read-only, pinned in full) or a
// copy in device memory. A lookup reads [T,K] int32 or int64 ids from
// device memory and writes [T,K] rows of R bytes into device memory at
// any non-overlapping byte strides; id -1 leaves its output row untouched,
// per-column offsets turn global ids into table rows, and every column
// names its own table.
//
// # Build
//
// The package needs cgo, CUDA's driver API header (cuda.h) and libcuda,
// behind the build tag `cuda`. Without the tag it builds anywhere and
// every entry point returns ErrNotSupported; engram's default build never
// links it. scripts/gpu-build.sh fetches the header and the stub libcuda
// (Debian's nvidia-cuda-dev) and builds the tagged test binaries;
// scripts/gpu-run.sh runs them on a GPU machine, and with them
// bench/torchbench.py (Python, not part of the module): PyTorch's own
// gather and a staged host path, the figures to set beside this package's.
//
// # Streams and ordering
//
// Lookup enqueues its kernels on the caller's stream and returns at once:
// the rows are in place when the stream reaches that point, and ordinary
// stream order and events order it with the caller's other work on the
// stream (a Stream is a raw CUstream handle, so a framework's stream can be
// passed in). A lookup from device tables is one kernel; its Go side is
// meant to allocate nothing (through engram's Device seam the C ABI's
// device test still counted allocations per lookup on the H200, being
// removed: docs/capi.md, sk_cuda_lookup).
//
// # Ordered lookups from host tables
//
// Rows read in id order are scattered over the whole table, and the device
// translates a host table's pages one by one; in address order, rows read
// together share their translations. A lookup that reads a host table and
// has at least 16,384 rows therefore runs ordered: three small kernels
// sort its rows into 4,096 buckets by where they lie in their tables, then
// the gather visits them bucket by bucket (H200, 1 GiB table, N=98,304:
// 1.5x at R=264, 4.3x at R=64; smaller lookups are not worth the three
// launches). The ordering scratch, 4 bytes a row plus 32 KiB, comes from
// the context's own stream-ordered memory pool, allocated and freed on the
// caller's stream, so a captured ordered lookup holds memory nodes and
// ordered lookups on different streams never share scratch. When the pool
// cannot give scratch, the plain gather runs instead.
//
// # Three paths for host tables
//
// At production sizes (tens of GiB) the device's translation of host pages
// bounds zero-copy lookups: on the H200 a 98,304-row lookup from two 16 GiB
// tables takes about 3 ms whatever the row size (31 ns a row), where the
// same rows from 1 GiB take 0.6-0.9 ms. Request.Host chooses:
//
//   - HostZeroCopy: the kernel reads the rows over PCIe. Asynchronous,
//     capturable, best for small lookups and small spans.
//   - HostStaged: the ids are read back (the stream is synchronized for
//     that; the workers are woken first and wait meanwhile),
//     Context.StagedWorkers CPU threads gather the rows (prefetching 16
//     rows ahead) into 16 pinned 2 MiB slots chunk by chunk, staying
//     awake for 1 ms after a lookup for the next; the copy engine moves each
//     finished chunk to device staging on the caller's stream while the
//     next are gathered, and one placing pass (a gather from the staging,
//     as from a device table) writes the output in its layout, -1 and bad
//     rows untouched. Bad ids are checked on the CPU and reported by
//     Status with the device's; a strict lookup checks every id first.
//   - HostSplit: the first tokens zero-copy on a stream of the context's
//     (ordered after the caller's stream, which then waits for it) while
//     the CPU stages the rest: the two limits are separate, and side by
//     side their rates add.
//   - HostAuto (the default) picks the fastest predicted from the
//     calibration of the lookup's class (CalibrateHost: both paths timed
//     on random rows over the whole of the lookup's tables at three sizes
//     up to 262,144 rows, interpolated between them, since zero-copy's
//     cost a row grows with the rows; the class is the row size and the
//     power of two of the tables' spans together, the span the device
//     translates; measured on a class's first HostAuto lookup, or ahead
//     by the caller for a table), the split where both parts take equal
//     predicted times, priced at that time times the split factor the
//     calibration measured (its two parts share the PCIe link and the
//     host's memory).
//
// Rows larger than a pinned slot (2 MiB) are read zero-copy only. A
// staged or split lookup returns once its rows have been gathered (its
// copies and last pass are still in flight on the stream). Under graph
// capture HostAuto runs zero-copy (a graph cannot replay a CPU gather),
// and HostStaged or HostSplit return ErrStagedCapture.
//
// # Graphs
//
// Context.Warmup loads the module and allocates the status word before any
// capture (an ordered lookup's scratch is a memory node of the graph). A lookup captured into a graph (Context.Capture) keeps its
// arguments, the id and output addresses included: replaying the graph
// gathers whatever ids the id buffer holds at replay time.
//
// # Host lookups
//
// A HostLookup is a lookup whose rows a host function fetches (a remote
// Engram store's lookup, say), enqueued on the stream like any other, so
// it can be captured into a graph and replayed with new ids: the stream
// copies the [T,K] ids to pinned host memory and sets a request word in
// mapped host memory, then waits on a done word (stream memory
// operations); the context's proxy goroutine, polling the request words
// (busily for Context.SetProxySpin after each request, then between short
// sleeps), runs the fetch into pinned staging and sets the done word; the
// staged rows with their row indices (i, or -1 for an id of -1) go to
// device memory, where the placing pass of the CPU-staged path writes
// them into the output. Where the driver cannot capture stream memory
// operations (Warmup probes it) the fetch runs in a host function of the
// stream instead (cuLaunchHostFunc, a host node of a captured graph),
// which costs the driver's dispatch of a host function on the lookup's
// path. A fetch that fails, panics or runs past
// its deadline (HostLookupConfig.Timeout) sets every index to -1, so
// nothing is written: the stream goes on, nothing traps, and Status
// reports a *HostLookupError wrapping the fetch's error. Its memory is
// allocated with the calling thread in relaxed capture mode, so one may
// be made inside a capture of any mode. The fetch must not call CUDA nor
// wait for anything that waits for a stream. A remote Engram store's
// lookup, captured (rows from the store's pinned buffer memory):
//
//	buf, _ := store.NewBuffer(T * K * R) // store.PinBuffers(ctx.PinHost) done once
//	hl, _ := ctx.NewHostLookup(cudagather.HostLookupConfig{T: T, K: K, RowBytes: R, IDs64: true, Rows: buf.Bytes(),
//		Fetch: func(c context.Context, _ []int32, ids []int64, rows []byte) error {
//			return store.LookupContext(c, tables, engram.IDs64(ids, T, K), engram.TokenMajor(rows, T, K, R), nil)
//		}})
//	g, _ := ctx.Capture(s, func() error { return hl.Enqueue(s, idsDev, outDev, outBytes, 0, K*R, R) })
//	// each g.Launch(s) fetches the rows of the ids idsDev holds then;
//	// ctx.Status(s, K) reports a failed fetch.
//
// # Device copies between ranks
//
// CopyDevice2D enqueues a batch of two-dimensional device-to-device
// copies (DeviceCopy: a reshard's Copy2D with its ranks' memory resolved)
// in one cgo call, one completion for the batch; ExportIPC and OpenIPC
// let a process address another process's device allocation on the same
// host (CUDA IPC, peer access enabled lazily across devices), which is
// how GPU ranks in processes of their own exchange a reshard's bytes.
// Its tests use one GPU and two processes, device 0 as both ranks.
//
// # Bad ids
//
// Ids live in device memory, so they are checked on the device: an id that
// is neither -1 nor a row of its column's table is never read and its
// output row is left untouched; the context's status word records the
// first such id (in token-major order). Context.Status synchronizes the
// stream, returns an *IDError for it and clears it. With
// Request.Strict, a validation pass runs first and the gather writes
// nothing when any id is bad (one more launch). Shapes, strides, row sizes
// and table sizes are checked on the host before anything is enqueued.
//
// # Threads and lifetimes
//
// The context is created, its module loaded and, at Close, destroyed on
// one locked OS thread. Calls from other goroutines make the context
// current on their own (locked) thread for the duration of the call, so a
// lookup costs no goroutine hand-off. Tables, buffers and graphs must not
// be closed while work that uses them is pending on a stream: synchronize
// first. Close of a context with open tables or graphs returns ErrBusy and
// closes nothing.
//
// # Kernels
//
// kernels/gather.cu holds the kernels; kernels/gather.ptx, generated from
// it and committed, is embedded (regenerate on a machine with nvcc:
// nvcc -arch=sm_90 -ptx -O3 -o kernels/gather.ptx kernels/gather.cu; the
// environment variable CUDAGATHER_PTX names a PTX file to load instead, for
// trying a kernel before it is committed). A
// warp copies 32/G rows per step with G lanes per row in the widest word
// (16, 8 or 4 bytes) every address and stride allows, several rows in
// flight per lane before the first store. Device-table rows of 16c+8
// bytes with c <= 8 (72, 104, 136) go to the flat kernels instead: a
// warp's rows as one stream of 8-byte words, every lane busy.
package cudagather
