"""Side-by-side figures for package cudagather, run on the GPU machine by
scripts/gpu-run.sh: torch.index_select on a uint8 [rows, R] device table
(the framework's own gather) and the staged path for a host table (CPU
gather into pinned memory, then a host-to-device copy), with the copy
ceilings measured in the same run. Writes JSON lines (scatterbench schema)
to the file named by --json.

usage: python3 torchbench.py --json OUT.jsonl
"""
import json, sys, time
import torch

def timeit(f, reps=15, inner=20):
    """Median over reps of the mean of inner back-to-back runs between two
    events (launch gaps overlap execution, as on a busy stream)."""
    s = torch.cuda.current_stream()
    for _ in range(5):
        f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(s)
        for _ in range(inner):
            f()
        b.record(s)
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3 / inner)
    ts.sort()
    return ts[len(ts) // 2]

lines = []
def emit(**kw):
    lines.append(kw)
    print(json.dumps(kw), flush=True)

big = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
big2 = torch.empty_like(big)
d2d = timeit(lambda: big2.copy_(big), 5, 4)
d2d_gbs = 2 * big.numel() / (d2d * 1e-6) / 1e9
del big2
pin = torch.empty(1 << 30, dtype=torch.uint8).pin_memory()
h2d = timeit(lambda: big[: pin.numel()].copy_(pin, non_blocking=True), 5, 4)
h2d_gbs = pin.numel() / (h2d * 1e-6) / 1e9
big.random_(0, 256)
emit(workload="ceiling/d2d-copy", **{"for": "torch"}, transport="cuda", goodput_gbps=8 * d2d_gbs)
emit(workload="ceiling/h2d-copy", **{"for": "torch"}, transport="cuda", goodput_gbps=8 * h2d_gbs)

for R in (64, 128, 264, 512, 1024, 4096):
    rows = big.numel() // R
    table = big[: rows * R].view(rows, R)
    for N in (128, 98304, 1 << 20):
        if N * R > (1 << 30):
            continue
        # Four id sets in turn, as the Go benchmark does: no run finds the
        # last run's rows in L2.
        id_sets = [torch.randint(0, rows, (N,), dtype=torch.int64, device="cuda") for _ in range(4)]
        turn = [0]
        def isel():
            turn[0] += 1
            return torch.index_select(table, 0, id_sets[turn[0] % 4])
        us = timeit(isel)
        gbs = 2 * N * R / (us * 1e-6) / 1e9
        emit(workload=f"torch-index-select/R={R}/N={N}", transport="cuda", mode="index_select", fragments=N,
             payload_bytes=N * R, p50_ms=us / 1e3, goodput_gbps=8 * gbs, ratio=gbs / d2d_gbs)

# Staged path for a host table: CPU gather into pinned memory, then H2D.
R, N = 264, 98304
host = pin[: (pin.numel() // R) * R]
host.random_(0, 256)
rows = host.numel() // R
ids = torch.randint(0, rows, (N,), dtype=torch.int64)
staged = torch.empty(N * R, dtype=torch.uint8).pin_memory()
out = torch.empty(N * R, dtype=torch.uint8, device="cuda")
ts = []
for _ in range(12):
    t0 = time.perf_counter()
    torch.index_select(host.view(rows, R), 0, ids, out=staged.view(N, R))
    out.copy_(staged, non_blocking=True)
    torch.cuda.synchronize()
    ts.append(time.perf_counter() - t0)
ts.sort()
us = ts[len(ts) // 2] * 1e6
emit(workload=f"staged/R={R}/N={N}", transport="cuda", mode="staged", fragments=N, payload_bytes=N * R,
     p50_ms=us / 1e3, goodput_gbps=8 * N * R / (us * 1e-6) / 1e9, ratio=(N * R / (us * 1e-6) / 1e9) / h2d_gbs)
if "--json" in sys.argv:
    with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
        for l in lines:
            f.write(json.dumps(l) + "\n")
