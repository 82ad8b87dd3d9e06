"""Writes the crafted files of testdata/crafted that are made by Python's own
pickle, tarfile and zipfile (see INDEX.json, made_by "python3"). Nothing here
is ever unpickled. Deterministic: fixed times, owners and order.

    python3 testdata/crafted/make_python.py testdata/crafted
"""
import io
import os
import pickle
import sys
import tarfile
import zipfile


class System:
    """Pickles as posix.system('true') without referencing os at load time."""

    def __init__(self, proto_global=("posix", "system")):
        self.g = proto_global

    def __reduce__(self):
        import posix
        return (posix.system, ("true",))


def tar_bytes(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size, ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname, ti.mode = len(data), 0, 0, 0, "", "", 0o644
            tar.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def gnu_tar_bytes(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size, ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname, ti.mode = len(data), 0, 0, 0, "", "", 0o644
            tar.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def main(out):
    evil = pickle.dumps(System(), protocol=2)
    files = {}
    # a pre-0.4 style tar checkpoint whose "pickle" member runs posix.system
    files["py_tar_pickle_member.pt"] = tar_bytes([
        ("storages", pickle.dumps(0, protocol=2) + pickle.dumps([], protocol=2)),
        ("tensors", pickle.dumps(0, protocol=2)),
        ("pickle", evil),
    ])
    # the same with a GNU tar and the payload in the storages count pickle
    files["py_gnutar_storages_member.pt"] = gnu_tar_bytes([
        ("storages", evil),
        ("tensors", pickle.dumps(0, protocol=2)),
        ("pickle", pickle.dumps({}, protocol=2)),
    ])
    # a protocol-0 pickle as Python writes it (no PROTO byte to sniff)
    files["py_pickle_p0_system.bin"] = pickle.dumps(System(), protocol=0)
    # a zip whose DEFLATE-compressed data.pkl has 64 MiB of padding before the payload
    pad = pickle.dumps(b"\0" * (64 << 20), protocol=4)[:-1]  # without STOP
    body = pad + b"0" + pickle.dumps(System(), protocol=2)[2:]  # POP the padding, then the payload
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, data in [("archive/data.pkl", body), ("archive/version", b"3\n")]:
            zi = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    files["py_zip_deflated_padding.pt"] = zbuf.getvalue()
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__))
