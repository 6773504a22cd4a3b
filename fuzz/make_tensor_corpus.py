#!/usr/bin/env python3
"""make_tensor_corpus.py — writes the seed corpus of fuzz_tensor (fuzz/corpus/tensor/) with the
packers of python/mooncake/tensor.py itself (_pack_header, _pack_manifest), in the input layout
fuzz_tensor.c describes (byte 0 picks the decoder). Runs without torch.

    python3 fuzz/make_tensor_corpus.py fuzz/corpus/tensor
"""
import importlib.util
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.modules["torch"] = None  # tensor.py imports without torch; the packers do not need it
spec = importlib.util.spec_from_file_location(
    "mooncake_tensor", os.path.join(HERE, "..", "python", "mooncake", "tensor.py"))
t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t)


def write(out, name, mode, payload):
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([mode]) + payload)


def main(out):
    os.makedirs(out, exist_ok=True)
    data = bytes(range(24))  # 2 x 3 float32
    full = t._pack_header(0, (2, 3), (2, 3), len(data))
    write(out, "header-full", 1, full + data)
    write(out, "header-total", 0, struct.pack("<Q", t.HEADER_SIZE + len(data)) + full)
    shard = t._pack_header(11, (4, 6), (4, 3), 24, t.LAYOUT_SHARD,
                           ((t.AXIS_TP, 0, 1, 2, 1, 0, 3),))
    write(out, "header-shard", 1, shard + bytes(24))
    empty = t._pack_header(8, (0,), (0,), 0)
    write(out, "header-empty", 1, empty)
    write(out, "manifest", 2, t._pack_manifest(0, (8, 4), 0, 2))
    head = json.dumps({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
                       "b": {"dtype": "I8", "shape": [4], "data_offsets": [24, 28]},
                       "__metadata__": {"format": "pt"}}, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    st = struct.pack("<Q", len(head)) + head + bytes(28)
    write(out, "safetensors", 3, st)
    write(out, "safetensors-want", 4, st)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus", "tensor"))
