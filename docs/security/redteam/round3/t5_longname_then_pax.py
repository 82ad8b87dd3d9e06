# GNU longname 'L' header, THEN a pax 'x' header with path=decoy, then the member: tarfile's
# _proc_gnulong sets the name after the pax header was applied, so the long name ('pickle') wins.
import sys; import os; sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); from tarlib import *
out = sys.argv[1]; h = len(sys.argv) > 2
ln = b'pickle\0'
f = member(b'storages', STORAGES0) + member(b'tensors', TENSORS0) \
    + hdr(b'././@LongLink', len(ln), b'L') + data(ln) + pax([(b'path', b'decoy')]) + member_gadget(b"other", payload(h)) + end()
open(out, 'wb').write(f)
