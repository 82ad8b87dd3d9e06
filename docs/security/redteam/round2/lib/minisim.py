# Mimic torch's PyTorchStreamReader (miniz) reading <prefix>/data.pkl, then pickle.loads it.
import struct, sys, zlib, pickle
def load(path):
    d = open(path, 'rb').read()
    assert d[:4] == b'PK\x03\x04', 'torch _is_zipfile needs local header at 0'
    p = d.rfind(b'PK\x05\x06', 0, len(d) - 21)        # miniz: last sig with room for a record
    _, _, _, n_disk, n, cdsize, cdoff, _ = struct.unpack('<IHHHHIIH', d[p:p+22])
    if p >= 20 and d[p-20:p-16] == b'PK\x06\x07':
        o = struct.unpack('<Q', d[p-12:p-4])[0]
        if d[o:o+4] == b'PK\x06\x06':
            n, cdsize, cdoff = struct.unpack('<QQQ', d[o+32:o+56])
    ents = []; q = cdoff
    for i in range(n):
        h = d[q:q+46]; assert h[:4] == b'PK\x01\x02'
        meth, crc, cs, us, nl, el, cl = struct.unpack('<H4xIIIHHH', h[10:34]); lho = struct.unpack('<I', h[42:46])[0]
        name = d[q+46:q+46+nl]; ents.append((name, meth, cs, us, lho)); q += 46 + nl + el + cl
    prefix = ents[0][0].split(b'/')[0]
    key = (prefix + b'/data.pkl').lower()
    cands = [e for e in ents if e[0].lower() == key]
    name, meth, cs, us, lho = cands[0]
    assert d[lho:lho+4] == b'PK\x03\x04'
    nl, el = struct.unpack('<HH', d[lho+26:lho+30]); off = lho + 30 + nl + el
    raw = d[off:off+cs]
    data = raw if meth == 0 else zlib.decompress(raw, -15)
    print('miniz-sim: %s at data offset %d' % (name, off))
    return pickle.loads(data, encoding='utf-8')
if __name__ == '__main__':
    print('result:', load(sys.argv[1]))
