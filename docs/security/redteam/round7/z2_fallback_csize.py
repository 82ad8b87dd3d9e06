# STORED archive/data.pkl whose csize (2) is smaller than its usize (the whole pickle): miniz reads usize
# bytes (csize != usize passes its check when the DOS time is nonzero). 4 spare bytes at the end of the
# central directory (cdsize counts them; miniz ignores them) make readZip refuse the directory, and the
# fallback scans csize bytes of each candidate member.
import sys, struct, zlib
import os; sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); from zlib7 import *
out, mode = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else '')
P = payload(mode)
f = bytearray()
f += lh(b'archive/data.pkl', 2, len(P), zlib.crc32(P)); f += P
lv = len(f); ver = b'3\n'; f += lh(b'archive/version', 2, 2, zlib.crc32(ver)); f += ver
cd = ch(b'archive/data.pkl', 2, len(P), 0, zlib.crc32(P)) + ch(b'archive/version', 2, 2, lv, zlib.crc32(ver)) + b'\0\0\0\0'
cdoff = len(f); f += cd; f += eocd(2, len(cd), cdoff)
open(out, 'wb').write(f)
if mode == 'print':
    import miniz_sim; print('result:', miniz_sim.load(out))
