"""An SGLang-style Engram adapter over scatterkit (docs/python.md shows it).

One layer's Engram input: 3 n-gram sizes x 8 heads = 24 columns, each a
hash vocabulary of its own size, kept as one table in which column k's
rows start at starts[k] (DeepSeek's MultiHeadEmbedding layout). A row is
264 bytes: 256 FP8 E4M3 values, then two float32 scales, one per block
of 128. The adapter looks the rows up and dequantises them in torch.

CPU tensors for now; with the CUDA part of issue 16 the output becomes a
CUDA tensor and the lookup takes stream=torch.cuda.current_stream().

Run it: python3 tools/python/examples/sglang_adapter.py (a self-check).
"""

from __future__ import annotations

import numpy as np
import torch

from scatterkit.engram import EngramStore

NGRAMS, HEADS, DIM, BLOCK = 3, 8, 256, 128
COLUMNS = NGRAMS * HEADS  # 24
ROW = DIM + 4 * (DIM // BLOCK)  # 264 bytes: FP8 values, then float32 scales


def e4m3_table() -> torch.Tensor:
    """The float value of every FP8 E4M3 byte (torch < 2.1 has no float8 dtype)."""
    b = np.arange(256)
    sign = np.where(b & 0x80, -1.0, 1.0)
    exp, man = (b >> 3) & 0xF, b & 0x7
    v = np.where(exp == 0, man / 8 * 2.0**-6, (1 + man / 8) * 2.0 ** (exp - 7))
    v = np.where((exp == 15) & (man == 7), np.nan, v)
    return torch.from_numpy((sign * v).astype(np.float32))


_E4M3 = e4m3_table()


def dequantize(rows: torch.Tensor) -> torch.Tensor:
    """uint8 [..., 264] rows -> bfloat16 [..., 256] embeddings."""
    q, scales = rows[..., :DIM], rows[..., DIM:].contiguous().view(torch.float32)
    if hasattr(torch, "float8_e4m3fn"):
        x = q.contiguous().view(torch.float8_e4m3fn).to(torch.float32)
    else:
        x = _E4M3.to(q.device)[q.long()]
    x = x.unflatten(-1, (DIM // BLOCK, BLOCK)) * scales[..., None]
    return x.flatten(-2).to(torch.bfloat16)


class EngramLayerInput:
    """The 24 Engram embeddings of one layer's tokens, from hash ids."""

    def __init__(self, store: EngramStore, table: str, vocab_sizes: list[int]):
        assert len(vocab_sizes) == COLUMNS
        self.store = store
        self.names = (table,) * COLUMNS  # one table, named once per column
        # lookup subtracts offsets (global ids -> table rows); the hasher's
        # ids are column-local, so each column's offset is minus its start.
        # (A remote store takes no negative offset: add the starts to the
        # ids instead.)
        starts = np.cumsum([0, *vocab_sizes[:-1]])
        self.offsets = -starts.astype(np.int64)
        store.warmup(self.names)

    def __call__(self, hash_ids: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """hash_ids: int64 [T, 24] on the CPU or a CUDA device, -1 where a
        position has no n-gram yet. Returns bfloat16 [T, 24, 256] on the
        same device; a -1 leaves its row as it was in rows (zeros when rows
        is not given). On CUDA the lookup is enqueued on the current stream,
        so the dequantisation after it (same stream) sees its rows."""
        if rows is None:
            rows = torch.zeros((hash_ids.shape[0], COLUMNS, ROW), dtype=torch.uint8, device=hash_ids.device)
        self.store.lookup(self.names, hash_ids, rows, offsets=self.offsets)
        return dequantize(rows)


def main(local_dir: str | None = None, device: str | None = None) -> None:
    import tempfile

    from scatterkit.engram import cuda_device_count

    if device is None:  # CUDA where this machine has it (the GPU machine), else the CPU
        device = "cuda" if torch.cuda.is_available() and cuda_device_count() > 0 else "cpu"

    rng = np.random.default_rng(0)
    vocab = [int(v) for v in rng.integers(500, 3000, COLUMNS)]  # primes in a real model
    n = sum(vocab)
    fp8 = rng.integers(0, 256, (n, DIM), dtype=np.uint8)
    fp8[(fp8 & 0x7F) == 0x7F] = 0  # no NaN codes
    scales = rng.uniform(0.001, 0.1, (n, DIM // BLOCK)).astype(np.float32)
    table = np.concatenate([fp8, scales.view(np.uint8)], axis=1)
    assert table.shape == (n, ROW)

    with tempfile.TemporaryDirectory() as tmp, EngramStore(
        tables={"layer3.engram": {"num_rows": n, "row_bytes": ROW}},
        namespace="sglang-example",
        local_dir=local_dir or tmp,
    ) as store:
        store.populate("layer3.engram", table)
        engram = EngramLayerInput(store, "layer3.engram", vocab)

        T = 16
        hash_ids = torch.from_numpy(np.stack([rng.integers(0, v, T) for v in vocab], axis=1))
        hash_ids[:2, :HEADS] = -1  # the first tokens have no 2-gram
        emb = engram(hash_ids.to(device)).cpu()  # [T, 24, 256] bfloat16

        starts = np.cumsum([0, *vocab[:-1]])
        ids = hash_ids.numpy()
        rows = np.where((ids >= 0)[..., None], table[np.where(ids >= 0, ids + starts, 0)], 0)
        want = dequantize(torch.from_numpy(np.ascontiguousarray(rows)))
        assert emb.shape == (T, COLUMNS, DIM) and emb.dtype == torch.bfloat16
        assert torch.equal(emb, want) and not emb[:2, :HEADS].any()
        per_ngram = emb.unflatten(1, (NGRAMS, HEADS))  # [T, 3, 8, 256] for the model's gate
        print(f"ok: {T} tokens x {COLUMNS} columns -> {tuple(per_ngram.shape)} {per_ngram.dtype} ({device})")


if __name__ == "__main__":
    main()
