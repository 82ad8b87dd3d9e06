"""Writes the expanded-view checkpoints of testdata/views with real torch
(torch.save of torch 1.13; see INDEX.json). An expanded view is a tensor
whose contiguous form is larger than its storage (expand, a stride of 0):
torch loads it as a view at no cost, its safetensors form repeats the
stored elements.

    /usr/bin/python3 testdata/views/make_views.py testdata/views
"""
import os
import sys

import torch


def main(out):
    # one stored float standing for 2^36 elements (256 GiB as F32): the
    # red-team file F5 (e4_zero_stride.pt), written by torch.save itself
    w = torch.tensor([1.5]).expand(1 << 18, 1 << 18)
    assert w.stride() == (0, 0)
    torch.save({"w": w}, os.path.join(out, "expanded_zero_stride.pt"))
    torch.save({"w": w}, os.path.join(out, "expanded_zero_stride_legacy.pt"), _use_new_zipfile_serialization=False)
    # a base tensor and a small expansion of it (16 bytes stand for 16,000):
    # what an opt-in within its proportional cap converts
    b = torch.arange(4, dtype=torch.float32)
    torch.save({"base": b, "rows": b.expand(1000, 4)}, os.path.join(out, "expanded_small.pt"))
    # many distinct views of one storage, none expanded: 256 offset slices
    # of 3840 floats each of a 4096-float (16 KiB) storage, each a plain
    # contiguous view no larger than its storage, together 3.9 MB in a file
    # of about 60 KB (red-team: 1000 slices of a 4 MB storage stand for 4 GiB)
    s = torch.arange(4096, dtype=torch.float32)
    views = {"s%03d" % i: s[i:i + 3840] for i in range(256)}
    assert all(v.storage_offset() == i for i, v in enumerate(views.values()))
    torch.save(views, os.path.join(out, "overlapping_slices.pt"))
    torch.save(views, os.path.join(out, "overlapping_slices_legacy.pt"), _use_new_zipfile_serialization=False)
    # what reads by default: the whole storage, a tied alias of it (the same
    # view under two names) and 16 disjoint slices covering it
    whole = torch.arange(4096, dtype=torch.float32)
    ok = {"whole": whole, "tied": whole}
    ok.update({"part%02d" % i: whole[256 * i:256 * (i + 1)] for i in range(16)})
    torch.save(ok, os.path.join(out, "disjoint_slices.pt"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
