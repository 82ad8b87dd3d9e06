# The torch oracle's child process (see oracle.go). Run as
#   /usr/bin/python3 -I -c SOURCE
# with a throwaway working directory and TMPDIR. Protocol:
#   stdin, line 1:  {"allow": [...], "tmp": DIR, "weights_only": bool, "watch_build": bool}
#   stdin, then:    {"id": N, "path": PATH} per request
#   fd 3 (results): {"ready": true} once armed, then per request any number of
#                   {"id": N, "global": "module.name"} as find_class runs, then
#                   {"id": N, "done": {...}}
# Nothing named by a pickle is ever imported or called unless it is on the
# allowlist: the audit hook is installed before anything else and raises
# (a BaseException, which nothing in torch catches) for every other
# pickle.find_class, whichever unpickler raised the event.
import sys

_allowed = set()
_tmp = None
_armed = False
_cur = {"id": None, "globals": [], "refused": [], "events": []}
_out = None


class Refused(BaseException):
    """Raised by the audit hook; deliberately not an Exception."""


# Events that run code or reach the network: none of them has a place in
# torch.load of a checkpoint once everything it needs is imported.
_BACKSTOP = (
    "os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty",
    "os.kill", "os.killpg", "subprocess.Popen", "ctypes.", "socket.", "exec", "compile",
    "import", "webbrowser.open", "cpython.run_", "marshal.loads", "urllib.Request",
    "http.client.connect", "os.putenv", "sys.settrace", "sys.setprofile",
)
_WRITE_FLAGS = 0


def _inside_tmp(path):
    import os.path
    try:
        p = os.path.realpath(path if isinstance(path, (str, bytes)) else str(path))
    except Exception:
        return False
    if isinstance(p, bytes):
        p = p.decode("utf-8", "surrogateescape")
    return p == _tmp or p.startswith(_tmp + "/")


def _emit(obj):
    import json
    _out.write(json.dumps(obj) + "\n")
    _out.flush()


def _hook(event, args):
    if event == "pickle.find_class":
        module, name = args
        g = "%s.%s" % (module, name)
        _cur["globals"].append(g)
        if _out is not None and _cur["id"] is not None:
            _emit({"id": _cur["id"], "global": g})
        if g not in _allowed:
            _cur["refused"].append(g)
            raise Refused(g)
        return
    if not _armed:
        return
    if event == "open":
        path, mode, flags = args
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
            (isinstance(flags, int) and flags & _WRITE_FLAGS)
        if writing and not _inside_tmp(path):
            _cur["events"].append("open-for-write %r" % (path,))
            raise Refused("open for writing outside the temporary directory")
        return
    for b in _BACKSTOP:
        if event == b or (b.endswith(".") and event.startswith(b)) or \
                (b in ("os.exec", "os.spawn", "cpython.run_") and event.startswith(b)):
            _cur["events"].append(event)
            raise Refused(event)


sys.addaudithook(_hook)

# Nothing above imported anything that a pickle could name; from here on the
# hook is in place.
import hashlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import encodings  # noqa: E402
import pkgutil  # noqa: E402

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

# _codecs.encode looks its codec up (an import) the first time: import every
# codec now so that an armed hook sees no imports from it.
for _m in pkgutil.iter_modules(encodings.__path__):
    try:
        __import__("encodings." + _m.name)
    except Exception:
        pass

import torch  # noqa: E402
import torch.jit  # noqa: E402
import torch.serialization  # noqa: E402
import tarfile  # noqa: E402
import tempfile  # noqa: E402
import pickle  # noqa: E402
import collections  # noqa: E402
import _codecs  # noqa: E402,F401

torch.set_num_threads(1)


class TorchScript(BaseException):
    pass


def _no_jit(*a, **k):
    raise TorchScript("torch.load dispatched to torch.jit.load (a TorchScript archive)")


torch.jit.load = _no_jit

import types  # noqa: E402


class _WatchedUnpickler(pickle._Unpickler):
    """CPython's pure-Python unpickler (same opcodes, same audit events as
    the C one) with BUILD watched: load_build calls
    getattr(inst, "__setstate__"), where an instance attribute wins over the
    class's method. A __setstate__ the pickle's data put there (or that a
    class's __getattr__ answers with) is refused and reported: pickle would
    call something no find_class resolved."""

    def load_build(self):
        inst = self.stack[-2]  # the state is on top
        try:
            d = object.__getattribute__(inst, "__dict__")
        except Exception:
            d = None
        setstate = getattr(inst, "__setstate__", None)
        own = getattr(type(inst), "__setstate__", None)
        if setstate is not None and (own is None or (isinstance(d, dict) and "__setstate__" in d)):
            what = "BUILD calls a __setstate__ from the data of a %s instance: %s" % (
                type(inst).__qualname__, repr(setstate)[:80])
            _cur["events"].append(what)
            raise Refused(what)
        return pickle._Unpickler.load_build(self)

    dispatch = dict(pickle._Unpickler.dispatch)
    dispatch[pickle.BUILD[0]] = load_build


# torch 1.13's torch.load replaces any pickle_module with the module global
# pickle when weights_only is False: the watched unpickler is handed to it
# as torch.serialization's pickle, a copy of pickle's namespace.
_watched = types.ModuleType("watched_pickle")
_watched.__dict__.update({k: v for k, v in vars(pickle).items() if not k.startswith("__")})
_watched.Unpickler = _WatchedUnpickler
_watched.load = lambda f, **kw: _WatchedUnpickler(f, **kw).load()
_watched.loads = lambda b, **kw: _WatchedUnpickler(io.BytesIO(b), **kw).load()
_watch_build = False

_DTYPES = {
    torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
    torch.int8: "I8", torch.uint8: "U8", torch.int16: "I16", torch.int32: "I32",
    torch.int64: "I64", torch.bool: "BOOL", torch.complex64: "C64",
}


def _key(k):
    # the names torch/flatten.go gives (keyString)
    if k is None:
        return "None"
    if k is True:
        return "True"
    if k is False:
        return "False"
    if isinstance(k, int):
        return str(int(k))
    if isinstance(k, float):
        if k != k:
            return "NaN"
        if k in (float("inf"), float("-inf")):
            return "+Inf" if k > 0 else "-Inf"
        r = repr(k)
        return r[:-2] if r.endswith(".0") else r
    if isinstance(k, str):
        return k
    if isinstance(k, bytes):
        return k.decode("utf-8", "replace")
    if isinstance(k, tuple):
        return "(" + ", ".join(_key(x) for x in k) + ")"
    return type(k).__name__


def _tensor_bytes(t):
    t = t.detach()
    if t.is_quantized or t.layout != torch.strided or t.is_meta:
        return None
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)  # the values torch computes with: 0 or 1
    t = t.contiguous().reshape(-1)
    if t.dtype.is_complex:
        t = torch.view_as_real(t).reshape(-1)
    return t.view(torch.uint8).numpy().tobytes()


def _is_optimizer_state(v):
    # an optimizer's state_dict(): "state" keyed by parameter index, and
    # "param_groups", a list of dicts each listing its "params"
    if not isinstance(v, dict) or "state" not in v or "param_groups" not in v:
        return False
    st, pg = v["state"], v["param_groups"]
    return isinstance(st, dict) and all(type(k) is int for k in st) and \
        isinstance(pg, list) and all(isinstance(g, dict) and "params" in g for g in pg)


def _flatten(root):
    out = []
    stack = [("", root, 0, False)]
    on_path = set()
    while stack:
        name, v, depth, opt = stack.pop()
        if isinstance(v, torch.Tensor):
            out.append((name, v, opt))
            continue
        if isinstance(v, dict):
            items = list(v.items())
            opt = opt or _is_optimizer_state(v)
        elif isinstance(v, (list, tuple)):
            items = list(enumerate(v))
        else:
            continue
        if id(v) in on_path or depth > 500:
            continue
        on_path.add(id(v))  # cycles are cut, not followed
        for k, child in reversed(items):
            n = _key(k)
            stack.append((name + "." + n if name else n, child, depth + 1, opt))
    return out


def _describe(name, t, opt):
    d = {"name": name, "dtype": _DTYPES.get(t.dtype, str(t.dtype)), "shape": list(t.shape),
         "optimizer_state": opt,
         "requires_grad": bool(t.requires_grad),
         "parameter": isinstance(t, torch.nn.Parameter)}
    try:
        b = _tensor_bytes(t)
    except Exception as e:
        b = None
        d["bytes_error"] = "%s: %s" % (type(e).__name__, e)
    if b is not None:
        d["sha256"] = hashlib.sha256(b).hexdigest()
        d["nbytes"] = len(b)
    return d


def _load(path, weights_only):
    res = {"loaded": False}
    try:
        if _watch_build and not weights_only:
            torch.serialization.pickle = _watched
            try:
                obj = torch.load(path, map_location="cpu", pickle_module=_watched)
            finally:
                torch.serialization.pickle = pickle
        else:
            obj = torch.load(path, map_location="cpu", weights_only=weights_only)
    except TorchScript as e:
        res["torchscript"] = True
        res["error"] = str(e)
        return res, None
    except Refused as e:
        res["error"] = "refused: %s" % e
        return res, None
    except RecursionError as e:
        res["error"] = "RecursionError: %s" % e
        return res, None
    except Exception as e:
        res["error"] = "%s: %s" % (type(e).__name__, str(e)[:500])
        return res, None
    res["loaded"] = True
    res["root"] = type(obj).__name__
    return res, obj


def _one(req, weights_only):
    _cur["id"] = req["id"]
    _cur["globals"], _cur["refused"], _cur["events"] = [], [], []
    res, obj = _load(req["path"], False)
    if obj is not None or res["loaded"]:
        try:
            res["tensors"] = [_describe(n, t, opt) for n, t, opt in _flatten(obj)]
        except Exception as e:
            res["describe_error"] = "%s: %s" % (type(e).__name__, e)
    res["globals"] = list(_cur["globals"])
    res["refused"] = list(_cur["refused"])
    res["events"] = list(_cur["events"])
    del obj
    if weights_only:
        _cur["globals"], _cur["refused"] = [], []
        wo, wobj = _load(req["path"], True)
        res["weights_only_loaded"] = wo["loaded"]
        if not wo["loaded"]:
            res["weights_only_error"] = wo.get("error", "")
        del wobj
        res["events"] += _cur["events"]
    _cur["id"] = None
    return res


def _tar_checkpoint(path, tensors):
    # A pre-0.4 tar checkpoint as torch's legacy_load reads it (members
    # storages, tensors, pickle), for the warm-up only.
    import struct
    st, te = io.BytesIO(), io.BytesIO()
    st.write(pickle.dumps(len(tensors), protocol=2))
    te.write(pickle.dumps(len(tensors), protocol=2))
    for i, t in enumerate(tensors.values()):
        st.write(pickle.dumps((i, "cpu", torch.FloatStorage), protocol=2))
        st.write(struct.pack("<q", t.numel()) + t.contiguous().numpy().tobytes())
        te.write(pickle.dumps((100 + i, i, None), protocol=2))
        te.write(struct.pack("<ii", t.dim(), 0) + struct.pack("<%dq" % t.dim(), *t.shape) +
                 struct.pack("<%dq" % t.dim(), *t.stride()) + struct.pack("<q", 0))
    st.write(pickle.dumps([], protocol=2))

    class P(pickle.Pickler):
        def persistent_id(self, obj):
            return str(100 + list(tensors.values()).index(obj)) if isinstance(obj, torch.Tensor) else None
    pk = io.BytesIO()
    P(pk, protocol=2).dump(dict(tensors))
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, b in (("storages", st), ("tensors", te), ("pickle", pk)):
            ti = tarfile.TarInfo(name)
            ti.size = len(b.getvalue())
            tar.addfile(ti, io.BytesIO(b.getvalue()))


def _warm_up(weights_only):
    # Everything torch.load imports lazily is imported now, before arming.
    sd = collections.OrderedDict([("w", torch.ones(2, 3)), ("b", torch.zeros(3, dtype=torch.bool))])
    saved = set(_allowed)
    _allowed.update({"collections.OrderedDict", "torch._utils._rebuild_tensor_v2", "torch.FloatStorage"})
    try:
        for i, kw in enumerate(({}, {"_use_new_zipfile_serialization": False}, None)):
            p = os.path.join(_tmp, "warm%d.pt" % i)
            if kw is None:
                _tar_checkpoint(p, {"w": torch.ones(2, 3)})
            else:
                torch.save(sd, p, **kw)
            torch.load(p, map_location="cpu")
            if _watch_build:
                torch.serialization.pickle = _watched
                try:
                    torch.load(p, map_location="cpu", pickle_module=_watched)
                finally:
                    torch.serialization.pickle = pickle
            if weights_only:
                try:
                    torch.load(p, map_location="cpu", weights_only=True)
                except Exception:
                    pass
            os.remove(p)
    finally:
        _allowed.clear()
        _allowed.update(saved)
    json.dumps({"x": [1.5, "y"]})
    "x".encode("latin1")
    # the modules of the allowed globals (argparse, numpy...) are imported
    # now: the armed hook refuses imports
    for g in sorted(_allowed):
        parts = g.split(".")
        for i in range(len(parts) - 1, 0, -1):
            try:
                __import__(".".join(parts[:i]))
                break
            except Exception:
                continue


def main():
    global _tmp, _armed, _out, _watch_build
    cfg = json.loads(sys.stdin.readline())
    _allowed.update(cfg["allow"])
    _tmp = os.path.realpath(cfg["tmp"])
    weights_only = bool(cfg.get("weights_only"))
    _watch_build = bool(cfg.get("watch_build"))
    # Keep fd 3 free: torch opens the checkpoint there, as in a user's
    # process (a tar member linked to /proc/self/fd/3 then reads it, not us).
    fd = os.dup(3)
    os.close(3)
    _out = os.fdopen(fd, "w", buffering=1)
    _warm_up(weights_only)
    lim = int(cfg.get("address_space", 0))
    if lim > 0:
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 20, 256 << 20))
    _armed = True
    _emit({"ready": True})
    for line in sys.stdin:
        req = json.loads(line)
        try:
            res = _one(req, weights_only)
        except BaseException as e:  # never let one file end the batch
            res = {"loaded": False, "error": "oracle: %s: %s" % (type(e).__name__, e),
                   "globals": list(_cur["globals"]), "refused": list(_cur["refused"]),
                   "events": list(_cur["events"])}
            _cur["id"] = None
        _emit({"id": req["id"], "done": res})


main()
