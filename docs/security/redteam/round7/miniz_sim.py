# Replays torch's PyTorchStreamReader (miniz 2.x/3.x, flags 0) closely enough for these attacks:
# last EOCD sig with >=22 bytes after it (window ~64K+4K), zip64 locator used wholesale,
# central-dir sanity (incl. the 32-bit read at the method offset), prefix from entry 0,
# case-insensitive binary search over a heap-sorted index, extract_to_mem reading uncomp_size
# bytes for STORED, version check, then pickle.loads of <prefix>/data.pkl.
import struct, sys, zlib, pickle, io
def lower(b): return bytes(c+32 if 65<=c<=90 else c for c in b)
def load(path, verbose=True):
    d = open(path,'rb').read(); size = len(d)
    assert d[:4] == b'PK\x03\x04'
    # locate_header_sig
    cur = max(size-4096, 0); found = -1
    while True:
        n = min(4096, size-cur); buf = d[cur:cur+n]
        for i in range(n-4, -1, -1):
            if buf[i:i+4] == b'PK\x05\x06' and size-(cur+i) >= 22:
                found = cur+i; break
        if found >= 0: break
        if cur == 0 or size-cur >= 65535+22: raise Exception('no EOCD')
        cur = max(cur-(4096-3), 0)
    e = d[found:found+22]
    _, ndisk, cddisk, n_on_disk, total, cdsize, cdoff, _ = struct.unpack('<IHHHHIIH', e)
    if found >= 76 and d[found-20:found-16] == b'PK\x06\x07':
        o = struct.unpack('<Q', d[found-12:found-4])[0]
        if o > size-56: raise Exception('zip64 eocd ofs')
        if d[o:o+4] == b'PK\x06\x06':
            ndisks64 = struct.unpack('<I', d[found-4:found])[0]
            recsz, = struct.unpack('<Q', d[o+4:o+12])
            ndisk, cddisk = struct.unpack('<II', d[o+16:o+24])
            n_on_disk, total, cdsize, cdoff = struct.unpack('<QQQQ', d[o+24:o+56])
            if recsz < 44 or ndisks64 != 1: raise Exception('zip64 bad')
    if total != n_on_disk: raise Exception('multidisk')
    if (ndisk|cddisk) != 0 and (ndisk != 1 or cddisk != 1): raise Exception('multidisk2')
    if cdsize < total*46 or cdoff+cdsize > size: raise Exception('cd bounds')
    cd = d[cdoff:cdoff+cdsize]; p = 0; ents = []
    for i in range(total):
        if len(cd)-p < 46 or cd[p:p+4] != b'PK\x01\x02': raise Exception('cd entry')
        h = cd[p:p+46]
        meth32, = struct.unpack('<I', h[10:14]); meth, = struct.unpack('<H', h[10:12])
        crc, cs, us, nl, el, cl = struct.unpack('<IIIHHH', h[16:34]); lho, = struct.unpack('<I', h[42:46])
        if 46+nl+el+cl > len(cd)-p: raise Exception('cd overrun')
        name = cd[p+46:p+46+nl]
        if (meth32 == 0 and us != cs) or (us and not cs) : raise Exception('cd sizes %r'%name)
        if lho+30+cs > size: raise Exception('cd entry past end %r'%name)
        ents.append((name, meth, cs, us, lho)); p += 46+nl+el+cl
    prefix = ents[0][0].split(b'\0')[0]
    assert b'/' in ents[0][0]
    pfx = ents[0][0][:ents[0][0].index(b'/')]
    import heapsort_sim
    order = heapsort_sim.sort([e[0] for e in ents])   # miniz's heap sort (equal keys in its order)
    def locate(name):
        key = lower(name.split(b'\0')[0]); lo, hi = 0, len(order)-1
        while lo <= hi:
            m = lo + ((hi-lo) >> 1); k = lower(ents[order[m]][0])
            if k == key: return order[m]
            if k < key: lo = m+1
            else: hi = m-1
        return None
    def extract(i):
        name, meth, cs, us, lho = ents[i]
        assert d[lho:lho+4] == b'PK\x03\x04'
        nl, el = struct.unpack('<HH', d[lho+26:lho+30]); off = lho+30+nl+el
        if off+cs > size: raise Exception('extract bounds')
        if meth == 0:
            if off+us > size: raise Exception('short read')
            return d[off:off+us], off
        return zlib.decompress(d[off:off+cs], -15)[:us], off
    vi = locate(pfx+b'/.data/version')
    if vi is None: vi = locate(pfx+b'/version')
    v = int(extract(vi)[0].strip() or b'x')
    assert 1 <= v <= 10, v
    assert all(e[0].startswith(pfx+b'/') for e in ents), 'getAllRecords throws: entry outside the prefix'
    di = locate(pfx+b'/data.pkl')
    data, off = extract(di)
    if verbose: print('miniz-sim: %r (entry %d) at data offset %d, %d bytes' % (ents[di][0], di, off, len(data)))
    class U(pickle.Unpickler):
        def persistent_load(self, pid): return pid
    return U(io.BytesIO(data), encoding='utf-8').load()
if __name__ == '__main__':
    print('result:', load(sys.argv[1]))
