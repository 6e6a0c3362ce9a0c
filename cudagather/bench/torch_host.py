"""The torch peer of BenchmarkHostTables (package cudagather), run on the
GPU machine by scripts/gpu-run.sh: lookups from host tables of production
size done the way a framework does them without scatterkit, a CPU
index_select (torch's own threads) into pinned memory, then one
host-to-device copy, for the same tables (two of half of --gib GiB each),
K=24 columns alternating between them, 3% of ids -1 (torch has no -1:
those rows are read as row 0, which only helps torch), the same row sizes
and lookup sizes, with the host-to-device copy ceiling measured in the same
run. Writes JSON lines (scatterbench schema) to the file named by --json.

usage: python3 torch_host.py --gib 32 --json OUT.jsonl
"""
import argparse, json, time
import torch

ap = argparse.ArgumentParser()
ap.add_argument("--gib", type=int, default=32)
ap.add_argument("--json")
args = ap.parse_args()

lines = []
def emit(**kw):
    lines.append(kw)
    print(json.dumps(kw), flush=True)

pin = torch.empty(1 << 30, dtype=torch.uint8).pin_memory()
dev = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
for _ in range(3):
    dev.copy_(pin, non_blocking=True)
torch.cuda.synchronize()
ts = []
for _ in range(5):
    t0 = time.perf_counter()
    dev.copy_(pin, non_blocking=True)
    torch.cuda.synchronize()
    ts.append(time.perf_counter() - t0)
ts.sort()
h2d = pin.numel() / ts[2] / 1e9
emit(workload="ceiling/h2d-copy-hosttable", **{"for": "torch"}, transport="cuda", goodput_gbps=8 * h2d)
del pin, dev

size = args.gib << 30
t0 = time.perf_counter()
mem = torch.empty(size, dtype=torch.uint8)
mem.fill_(0x5C)  # every page touched (the content does not matter to the timing)
print(f"host memory: {args.gib} GiB in {time.perf_counter() - t0:.1f} s, {torch.get_num_threads()} threads", flush=True)
half = size // 2
K = 24
for R in (64, 136, 200, 264, 520, 1024):
    rows = half // R
    ta = mem[: rows * R].view(rows, R)
    tb = mem[half : half + rows * R].view(rows, R)
    for N in (192, 4096, 98304, 196608):
        T = N // K
        sets = []
        for _ in range(4):
            ids = torch.randint(0, rows, (T, K), dtype=torch.int64)
            ids[torch.rand(T, K) < 0.03] = 0  # -1 in the Go benchmark
            sets.append((ids[:, 0::2].reshape(-1).contiguous(), ids[:, 1::2].reshape(-1).contiguous()))
        # torch's fastest form: each table's rows gathered by its CPU
        # threads straight into a contiguous pinned buffer (index_select
        # out=), each buffer copied down (the Go lookup writes the
        # interleaved [T,K,R] layout; torch is given the easier one).
        sa = torch.empty(T * K // 2, R, dtype=torch.uint8).pin_memory()
        sb = torch.empty_like(sa).pin_memory()
        out = torch.empty(2, T * K // 2, R, dtype=torch.uint8, device="cuda")
        def lookup(turn):
            ia, ib = sets[turn % 4]
            torch.index_select(ta, 0, ia, out=sa)
            torch.index_select(tb, 0, ib, out=sb)
            out[0].copy_(sa, non_blocking=True)
            out[1].copy_(sb, non_blocking=True)
            torch.cuda.synchronize()
        for i in range(3):
            lookup(i)
        reps = max(5, min(200, (64 << 20) // (N * R)))
        ts = []
        for rep in range(5):
            t0 = time.perf_counter()
            for i in range(reps):
                lookup(rep * reps + i)
            ts.append((time.perf_counter() - t0) / reps)
        ts.sort()
        us = ts[2] * 1e6
        gbs = N * R / (us * 1e-6) / 1e9
        emit(workload=f"torch-staged-hosttable/R={R}/N={N}", transport="cuda", mode="staged", fragments=N,
             payload_bytes=N * R, table_bytes=size, p50_ms=us / 1e3, goodput_gbps=8 * gbs, ratio=gbs / h2d)
if args.json:
    with open(args.json, "w") as f:
        for l in lines:
            f.write(json.dumps(l) + "\n")
