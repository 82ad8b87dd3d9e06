"""Writes the checkpoints of testdata/oracle with real torch (1.13), for the
oracle differential tests (torch/oracle_test.go, convert/oracle_test.go).
Each file has one line in INDEX.json. Nothing is ever unpickled here.

    /usr/bin/python3 testdata/oracle/make_checkpoints.py testdata/oracle [--force]

Files that exist are kept (legacy storage keys are memory addresses and set
order follows the hash seed, so a rewrite changes bytes the mutation tests
and fixtures were made from); --force rewrites them.

- tar_*.tar: pre-0.4 tar checkpoints (members storages, tensors, pickle),
  laid out exactly as torch's _legacy_load/legacy_load reads them (torch
  1.13 can load this format but no longer write it).
- legacy_p5.pt: the legacy (non-zip) format with pickle protocol 5.
- the rest: torch.save output holding what training code saves beside the
  weights (optimizer state, sets, dtypes, devices, numpy, argparse...).
"""
import argparse
import collections
import io
import os
import pickle
import struct
import sys
import tarfile

import numpy as np
import torch

torch.manual_seed(0)
FORCE = "--force" in sys.argv[1:]
_args = [a for a in sys.argv[1:] if a != "--force"]
OUT = _args[0] if _args else os.path.dirname(os.path.abspath(__file__))


def keep(name):
    return not FORCE and os.path.exists(os.path.join(OUT, name))

STORAGE = {torch.float32: torch.FloatStorage, torch.float64: torch.DoubleStorage,
           torch.float16: torch.HalfStorage, torch.int64: torch.LongStorage,
           torch.int32: torch.IntStorage, torch.uint8: torch.ByteStorage,
           torch.bool: torch.BoolStorage, torch.int8: torch.CharStorage,
           torch.int16: torch.ShortStorage, torch.bfloat16: torch.BFloat16Storage}


def tar_checkpoint(obj, tensors, tensor_type=None, views=False):
    """obj: the object to pickle (tensors inside it are saved as persistent
    ids); tensors: the distinct tensors, each stored whole in its own
    storage (views=True: every tensor after the first of a dtype is a view
    into the first's storage, via the storage_views list)."""
    st, te = io.BytesIO(), io.BytesIO()
    keys = {}
    storages = []  # (key, dtype, data bytes)
    view_list = []
    tensor_recs = []
    for i, t in enumerate(tensors):
        sid = 1000 + i
        data = t.contiguous().view(-1)
        storages.append((sid, t.dtype, data))
        tensor_recs.append((2000 + i, sid, t))
        keys[id(t)] = 2000 + i
    st.write(pickle.dumps(len(storages), protocol=2))
    for sid, dt, data in storages:
        st.write(pickle.dumps((sid, "cpu", STORAGE[dt]), protocol=2))
        st.write(struct.pack("<q", data.numel()))
        st.write(data.view(torch.uint8).numpy().tobytes() if dt != torch.bool else data.to(torch.uint8).numpy().tobytes())
    if views and len(storages) > 0:
        # a view storage: the second half of the first storage
        sid, dt, data = storages[0]
        n = data.numel()
        view_list.append((3000, sid, n // 2, n - n // 2))
    st.write(pickle.dumps(view_list, protocol=2))
    te.write(pickle.dumps(len(tensor_recs) + len(view_list), protocol=2))
    for key, sid, t in tensor_recs:
        te.write(pickle.dumps((key, sid, tensor_type(t) if tensor_type else None), protocol=2))
        te.write(struct.pack("<ii", t.dim(), 0) + struct.pack("<%dq" % t.dim(), *t.shape) +
                 struct.pack("<%dq" % t.dim(), *t.contiguous().stride()) + struct.pack("<q", 0))
    for vkey, root, off, n in view_list:
        te.write(pickle.dumps((4000, vkey, None), protocol=2))
        te.write(struct.pack("<ii", 1, 0) + struct.pack("<q", n) + struct.pack("<q", 1) + struct.pack("<q", 0))

    class P(pickle.Pickler):
        def persistent_id(self, o):
            if isinstance(o, torch.Tensor):
                return str(keys[id(o)])
            if isinstance(o, ViewRef):
                return "4000"
            return None
    pk = io.BytesIO()
    P(pk, protocol=2).dump(obj)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, b in (("storages", st), ("tensors", te), ("pickle", pk)):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mtime, ti.mode, ti.uname, ti.gname = len(b.getvalue()), 0, 0o644, "", ""
            tar.addfile(ti, io.BytesIO(b.getvalue()))
    return buf.getvalue()


class ViewRef:
    pass


class Rebuild:
    """Pickles as torch._utils._rebuild_tensor_v2 of t's storage with the
    given trailing arguments (after storage, offset, size, stride)."""

    def __init__(self, t, *rest):
        self.t, self.rest = t, rest

    def __reduce_ex__(self, proto):
        t = self.t
        return (torch._utils._rebuild_tensor_v2,
                (t.storage(), t.storage_offset(), tuple(t.size()), t.stride()) + self.rest)


class RebuildParameter:
    def __init__(self, t, requires_grad):
        self.t, self.rg = t, requires_grad

    def __reduce_ex__(self, proto):
        return (torch._utils._rebuild_parameter, (self.t, self.rg, collections.OrderedDict()))


def linear_sd():
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    return m, m.state_dict()


def adam_state(m):
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    m(torch.randn(5, 4)).sum().backward()
    opt.step()
    return opt.state_dict()


def save(name, obj, **kw):
    p = os.path.join(OUT, name)
    if not keep(name):
        torch.save(obj, p, **kw)
    return p


def write(name, data):
    if not keep(name):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


def main():
    os.makedirs(OUT, exist_ok=True)
    w = torch.randn(3, 4)
    b = torch.arange(5, dtype=torch.int64)
    flags = torch.tensor([True, False, True])
    sd = collections.OrderedDict([("w", w), ("b", b), ("flags", flags)])
    write("tar_state_dict.tar", tar_checkpoint(sd, [w, b, flags]))
    write("tar_tensor_type.tar", tar_checkpoint({"w": w}, [w], tensor_type=type))
    write("tar_storage_view.tar", tar_checkpoint({"w": w, "half": ViewRef()}, [w], views=True))

    save("legacy_p5.pt", sd, _use_new_zipfile_serialization=False, pickle_protocol=5)

    m, msd = linear_sd()
    opt = adam_state(m)
    # 14.5: optimizer state under names that are not on any list
    save("general_checkpoint.pt", {"epoch": 5, "model_state_dict": msd, "optimizer_state_dict": opt, "loss": 0.25})
    save("fairseq_style.pt", {"model": msd, "last_optimizer_state": opt, "extra_state": {"epoch": 2}})
    save("model_and_optimizer_state_dict.pt", {"model": msd, "optimizer_state_dict": opt})
    save("deepspeed_module.pt", {"module": msd, "buffer_names": [], "optimizer": None, "global_steps": 10})
    save("bare_optimizer.pt", opt)
    save("optimizer_odd_name.pt", {"w": w, "opt": opt})
    sgd = torch.optim.SGD(m.parameters(), lr=0.1).state_dict()  # no step: state {}
    save("fresh_sgd_beside_model.pt", {"model": msd, "optim_sd": sgd, "epoch": 0})
    save("bare_tensor_root.pt", w)

    # 14.13: values torch.save writes without a global at protocol 4/5
    save("set_frozenset_p4.pt", {"w": w, "tags": {"a", "b"}, "frozen": frozenset([1, 2])}, pickle_protocol=4)
    save("bytearray_p5.pt", {"w": w, "blob": bytearray(b"\x00\x01\x02")}, pickle_protocol=5)
    save("dtype_value.pt", {"w": w, "dtype": torch.float16})
    save("tuple_key.pt", {"w": w, "meta": {("a", 1): 3}})

    # 16.3: inert classes torch's own weights_only loader (newer torch) allows
    save("set_p2.pt", {"w": w, "tags": {"a", "b"}})
    save("device_value.pt", {"w": w, "device": torch.device("cpu")})
    save("argparse_namespace.pt", {"state_dict": msd, "hparams": argparse.Namespace(lr=0.1, layers=2)})
    save("numpy_scalar.pt", {"w": w, "best": np.float64(0.5)})
    save("numpy_array.pt", {"w": w, "arr": np.arange(3, dtype=np.int32)})
    save("argparse_namespace_tensor.pt", {"state_dict": msd, "hparams": argparse.Namespace(init=w)})
    save("tensor_under_tuple_key.pt", {("enc", 0): w, ("enc", 1): b})

    # 14.14: what torch refuses or normalises
    ints = torch.arange(4, dtype=torch.int64)
    save("requires_grad_int1_float.pt", {"w": Rebuild(w, 1, collections.OrderedDict())})
    save("requires_grad_true_int_tensor.pt", {"ids": Rebuild(ints, True, collections.OrderedDict())})
    save("rebuild_v2_seven_args.pt", {"w": Rebuild(w, False, collections.OrderedDict(), None)})
    save("parameter_requires_grad_int_tensor.pt", {"ids": RebuildParameter(ints, True)})
    raw = torch.tensor([0, 1, 2, 255], dtype=torch.uint8)
    save("bool_bytes_not_01.pt", {"flags": raw.view(torch.bool)})

    # 14.14: a pickle in the zip end record's comment (torch never reads it)
    if not keep("eocd_comment_pickle.pt"):
        buf = io.BytesIO()
        torch.save({"w": w}, buf)
        z = bytearray(buf.getvalue())
        i = z.rfind(b"PK\x05\x06")
        assert i >= 0 and z[i + 20:i + 22] == b"\x00\x00" and i + 22 == len(z)
        evil = b"\x80\x02cposix\nsystem\nX\x04\x00\x00\x00true\x85R."  # never unpickled here
        z[i + 20:i + 22] = struct.pack("<H", len(evil))
        write("eocd_comment_pickle.pt", bytes(z) + evil)
    # 14.14: a storage record named with other case (torch's miniz looks
    # names up without case, so it is the storage, not a stray record)
    if not keep("record_name_case.pt"):
        buf = io.BytesIO()
        torch.save({"w": w}, buf)
        z = buf.getvalue()
        assert z.count(b"archive/data/0") == 2
        write("record_name_case.pt", z.replace(b"archive/data/0", b"archive/DATA/0"))

    # 16.3: more inert classes torch's weights_only loader (2.x) allows
    save("bytearray_p2.pt", {"w": w, "blob": bytearray(b"\x00\xff")})
    save("complex_value.pt", {"w": w, "z": complex(1.5, -2)})
    save("counter_value.pt", {"w": w, "counts": collections.Counter({"a": 2})})
    save("tensor_class_value.pt", {"w": w, "kind": torch.FloatTensor})

    # 14.6: a TorchScript archive
    if not keep("torchscript_linear.pt"):
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), os.path.join(OUT, "torchscript_linear.pt"))
    # the same archive rewritten (never unpickled here): data.pkl naming
    # posix.system beside constants.pkl; constants.pkl renamed CONSTANTS.PKL,
    # which torch.load's exact test does not see (it unpickles data.pkl)
    import zipfile
    src = zipfile.ZipFile(os.path.join(OUT, "torchscript_linear.pt"))

    def rewrite(name, change):
        if keep(name):
            return
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
            for info in src.infolist():
                n, data = change(info.filename, src.read(info.filename))
                zi = zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0))
                z.writestr(zi, data)
        write(name, buf.getvalue())
    evil = b"\x80\x02cposix\nsystem\nX\x04\x00\x00\x00true\x85R."
    rewrite("torchscript_data_pkl_payload.pt",
            lambda n, d: (n, evil if n.endswith("/data.pkl") else d))
    rewrite("torchscript_constants_case.pt",
            lambda n, d: (n.replace("constants.pkl", "CONSTANTS.PKL"), d))


if __name__ == "__main__":
    main()
