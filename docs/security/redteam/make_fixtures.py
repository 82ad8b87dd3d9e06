"""Rebuild the red-team reviews' attack files as fixtures.

Usage: python3 make_fixtures.py OUTDIR

Each review's script (roundN/NAME.py) writes its attack with CPython's own
pickle, zipfile and tarfile; this writes them all to
OUTDIR/redteam_roundN_NAME.{tar,pt}. The committed copies in
testdata/crafted (one INDEX.json line each) are what the tests check;
`go generate ./torch` (go test -run TestCrafted -update) runs this to
rebuild them. The scripts are deterministic.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

SCRIPTS = [
    "round2/l1_legacy_frame_straddle", "round2/t1_tar_sparse", "round2/z1_eocd_comment", "round2/z2_frame_straddle",
    "round3/t1_tensors_one_pickle", "round3/t2_symlink_pickle", "round3/t3_hardlink_normpath",
    "round3/t4_pax_path_slash", "round3/t5_longname_then_pax",
    "round4/a1_sparse_overwrite", "round4/a2_selffd_symlink", "round4/b1_budget_bufio", "round4/b2_overlap_walk",
    "round5/p1_pax_sparse01", "round5/p2_neg_pax", "round5/p3_clean_polyglot",
    "round6/u1_unicode_pax_size", "round6/u2_unicode_sparse_realsize", "round6/u3_sparse00_regex",
    "round7/z1_shared_header_usize", "round7/z2_fallback_csize", "round7/z3_eocd_window",
    "round8/d1_dir_attr", "round8/x1_zip64_ext_sector", "round8/n1_nul_constants",
    "round9/bo_case", "round10/trunc_constants",
]


def main():
    out = sys.argv[1]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    for s in SCRIPTS:
        with tempfile.TemporaryDirectory() as d:
            tmp = os.path.join(d, "attack")
            subprocess.run([sys.executable, os.path.join(HERE, s + ".py"), tmp], check=True, env=env,
                           stdout=subprocess.DEVNULL)
            data = open(tmp, "rb").read()
        ext = ".pt" if data[:4] == b"PK\x03\x04" or not is_tar(data) else ".tar"
        name = "redteam_" + s.replace("/", "_") + ext
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


def is_tar(data):
    import io
    import tarfile
    try:
        tarfile.open(fileobj=io.BytesIO(data), mode="r:")
        return True
    except Exception:
        return False


if __name__ == "__main__":
    main()
