import struct, zlib
def lfh(name, data, method=0, flags=0, extra=b'', crc=None, csize=None, usize=None, ver=20):
    n = name.encode() if isinstance(name, str) else name
    c = zlib.crc32(data) if crc is None else crc
    return struct.pack('<IHHHHHIIIHH', 0x04034b50, ver, flags, method, 0, 0x21, c,
                       len(data) if csize is None else csize, len(data) if usize is None else usize, len(n), len(extra)) + n + extra
def cdh(name, data, off, method=0, flags=0, extra=b'', crc=None, csize=None, usize=None, disk=0):
    n = name.encode() if isinstance(name, str) else name
    c = zlib.crc32(data) if crc is None else crc
    return struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 20, 20, flags, method, 0, 0x21, c,
                       len(data) if csize is None else csize, len(data) if usize is None else usize, len(n), len(extra), 0, disk, 0, 0, off) + n + extra
def eocd(count, cdsize, cdoff, comment=b'', count_disk=None):
    return struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, count if count_disk is None else count_disk, count, cdsize, cdoff, len(comment)) + comment
def z64eocd(count, cdsize, cdoff):
    return struct.pack('<IQHHIIQQQQ', 0x06064b50, 44, 45, 45, 0, 0, count, count, cdsize, cdoff)
def z64loc(off):
    return struct.pack('<IIQI', 0x07064b50, 0, off, 1)
class Z:
    """Build a zip: add entries (writes local header + data), then cd(list) -> bytes"""
    def __init__(self, prefix=b''):
        self.buf = bytearray(prefix); self.ents = []
    def add(self, name, data, **kw):
        off = len(self.buf)
        lkw = {k: v for k, v in kw.items() if k in ('method','flags','crc','csize','usize')}
        if 'lextra' in kw: lkw['extra'] = kw['lextra']
        self.buf += lfh(kw.get('lname', name), data, **lkw) + data
        self.ents.append((name, data, off, kw))
        return off
    def cd(self, ents=None):
        ents = self.ents if ents is None else ents
        b = b''
        for name, data, off, kw in ents:
            ckw = {k: v for k, v in kw.items() if k in ('method','flags','crc','csize','usize')}
            if 'cextra' in kw: ckw['extra'] = kw['cextra']
            b += cdh(name, data, off, **ckw)
        return b
    def finish(self, ents=None, comment=b''):
        cd = self.cd(ents); off = len(self.buf)
        self.buf += cd + eocd(len(ents if ents is not None else self.ents), len(cd), off, comment)
        return bytes(self.buf)
