"""The SGLang-style adapter example runs, dequantises FP8 E4M3 correctly,
and docs/python.md shows it verbatim."""

from __future__ import annotations

import importlib.util
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "sglang_adapter.py")
DOC = os.path.join(HERE, "..", "..", "..", "docs", "python.md")
MARK = "<!-- example: tools/python/examples/sglang_adapter.py, from the imports to main() -->"


@pytest.fixture
def example(torch):
    spec = importlib.util.spec_from_file_location("sglang_adapter", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_example_runs(example, tmp_path, capsys):
    example.main(str(tmp_path / "cpu"), device="cpu")
    assert capsys.readouterr().out.startswith("ok: 16 tokens x 24 columns")


def test_example_runs_on_cuda(example, tmp_path, capsys, torch):
    """On the GPU machine: the adapter with CUDA hash ids (rows looked up
    into a CUDA tensor on the current stream, dequantised there)."""
    from scatterkit.engram import cuda_device_count

    if not torch.cuda.is_available() or cuda_device_count() == 0:
        if os.environ.get("REQUIRE_CUDA") == "1":
            pytest.fail("REQUIRE_CUDA=1: no CUDA here")
        pytest.skip("no CUDA here")
    example.main(str(tmp_path / "cuda"), device="cuda")
    assert capsys.readouterr().out.rstrip().endswith("(cuda)")


def test_e4m3_values(example, torch):
    lut = example.e4m3_table()
    known = {0x00: 0.0, 0x38: 1.0, 0x40: 2.0, 0xB8: -1.0, 0x7E: 448.0, 0x01: 2.0**-9, 0x08: 2.0**-6, 0x3C: 1.5}
    for b, v in known.items():
        assert lut[b].item() == v, hex(b)
    assert torch.isnan(lut[0x7F]) and torch.isnan(lut[0xFF])
    if hasattr(torch, "float8_e4m3fn"):  # torch >= 2.1: the table agrees with torch's own
        b = torch.arange(256, dtype=torch.uint8)
        ok = ~torch.isnan(lut)
        assert torch.equal(b.view(torch.float8_e4m3fn).to(torch.float32)[ok], lut[ok])


def test_doc_shows_the_example():
    src = open(EXAMPLE).read()
    want = src[src.index("import numpy as np") : src.index("def main(")].rstrip() + "\n"
    doc = open(DOC).read()
    assert MARK in doc, "docs/python.md lost the example's marker"
    block = doc[doc.index(MARK) + len(MARK) :]
    block = block[block.index("```python\n") + len("```python\n") :]
    block = block[: block.index("```\n")]
    assert block == want, "docs/python.md's adapter differs from tools/python/examples/sglang_adapter.py: copy it over"
