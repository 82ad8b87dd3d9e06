# HIGH, same root cause as u1 through another record: "GNU.sparse.realsize=<fullwidth digits>".
# tarfile: int() accepts it (member size 1024, the next header is read as usual), so "storages"
# (the payload) is listed and extracted. The scanner's pyInt refuses it, assumes Python raises
# ValueError, and ends the listing there: storages is never listed. Byte 0: PROTO 3 + BINBYTES
# spanning the file, so the legacy-stream decode skips the payload.
import sys, struct
import os; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'round3'))
from tarlib import *
out = sys.argv[1]; h = len(sys.argv) > 2
H0 = bytearray(pax([(b'GNU.sparse.realsize', '\uff11\uff10\uff12\uff14'.encode())]))
rest = hdr(b'pad', 0) + member(b'storages', payload(h)) + end()
H0[0:100] = b'\0' * 100
H0[0:7] = b'\x80\x03B' + struct.pack('<I', len(H0) + len(rest) - 7)
H0[148:156] = b' ' * 8
H0[148:156] = b'%06o\0 ' % sum(H0[:512])
open(out, 'wb').write(bytes(H0) + rest + b'.')
