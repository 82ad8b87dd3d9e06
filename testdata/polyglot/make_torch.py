#!/usr/bin/python3
"""Real torch.save output in the legacy format with the text protocols
(torch 1.13, /usr/bin/python3): no storages, so the bytes are reproducible.
Run: /usr/bin/python3 testdata/polyglot/make_torch.py testdata/polyglot"""
import os, sys
import torch

out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__)
notensor = {"epoch": 3, "lr": 0.1, "name": "run-7", "best": True, "sizes": [1, 2]}
for name, obj, proto in [("legacy_p0_empty_dict.pt", {}, 0),
                         ("legacy_p0_notensor.pt", notensor, 0),
                         ("legacy_p1_notensor.pt", notensor, 1)]:
    torch.save(obj, os.path.join(out, name), _use_new_zipfile_serialization=False, pickle_protocol=proto)
