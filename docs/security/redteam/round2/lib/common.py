import os, struct, zipfile
CLEAN_PKL = zipfile.ZipFile(os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../../../../testdata/torch/bare_tensor.pt')).read('bare_tensor/data.pkl')
CLEAN_DATA0 = zipfile.ZipFile(os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../../../../testdata/torch/bare_tensor.pt')).read('bare_tensor/data/0')
def evil(harmless, proto=2):
    mod, name, arg = (b'builtins', b'print', b'PAYLOAD REACHED') if harmless else (b'posix', b'system', b'echo PWNED')
    return (b'\x80' + bytes([proto]) if proto else b'') + b'c' + mod + b'\n' + name + b'\n(X' + struct.pack('<I', len(arg)) + arg + b'tR.'
