# Seekable zstd whose frames are all the same 2 KB frame of 64 MiB zeros: N frames -> N*64 MiB original.
# A < 10 MB file that `stats` / `validate --full` / `decompress` must decode fully (time, not memory).
import sys, struct, json, subprocess
N = int(sys.argv[2]) if len(sys.argv) > 2 else 4000
out = sys.argv[1]
zf = subprocess.run(['zstd', '-q', '-c', '--content-size'], input=bytes(64 << 20), capture_output=True).stdout  # one frame of 64 MiB zeros
U = 64 << 20
h = json.dumps({'z': {'dtype': 'F32', 'shape': [N * U // 4], 'data_offsets': [0, N * U]}}).encode()
h += b' ' * (-len(h) % 8)
pre = struct.pack('<Q', len(h)) + h
hf = subprocess.run(['zstd', '-q', '-c', '--content-size'], input=pre, capture_output=True).stdout
frames = [(hf, len(pre))] + [(zf, U)] * N
body = b''.join(f for f, _ in frames)
tab = b''.join(struct.pack('<III', len(f), u, 0)[:8] for f, u in frames)   # no checksums
tab += struct.pack('<IB', len(frames), 0) + struct.pack('<I', 0x8F92EAB1)
skip = struct.pack('<II', 0x184D2A5E, len(tab)) + tab
open(out, 'wb').write(body + skip)
