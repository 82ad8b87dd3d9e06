# archive/BYTEORDER = "big": miniz's case-insensitive lookup finds it for has_record("byteorder"),
# our byName (exact) does not. torch byte-swaps the storages; we convert them unswapped.
import sys, struct, zlib
import os; sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'z64_first_field.py')).read().split("PKL = b'archive/data.pkl'")[0].split("out, mode")[0])
def u(s):
    s = s.encode(); return b'X' + struct.pack('<I', len(s)) + s
B = (b'\x80\x02}' + u('w') + b'ctorch._utils\n_rebuild_tensor_v2\n(' + b'(' + u('storage') + b'ctorch\nFloatStorage\n'
     + u('0') + u('cpu') + b'K\x02tQK\x00(K\x02t(K\x01t\x89ccollections\nOrderedDict\n)RtRs.')
def lh(name, n, crc):
    return struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, 0, 0, 0x0001, 0x21, crc, n, n, len(name), 0) + name
def ch(name, n, lho, crc):
    return struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 20, 20, 0, 0, 0x0001, 0x21, crc, n, n, len(name), 0, 0, 0, 0, 0, lho) + name
recs = [(b'archive/data.pkl', B), (b'archive/version', b'3\n'), (b'archive/BYTEORDER', b'big'), (b'archive/data/0', struct.pack('<ff', 1.0, 2.0))]
f = bytearray(); cd = b''
for n_, d in recs:
    o = len(f); f += lh(n_, len(d), zlib.crc32(d)) + d; cd += ch(n_, len(d), o, zlib.crc32(d))
co = len(f); f += cd + struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, len(recs), len(recs), len(cd), co, 0)
open(sys.argv[1], 'wb').write(f)
