# Replays torch.load(weights_only=False)'s legacy tar path (torch/serialization.py legacy_load)
# with CPython's own tarfile and pickle; torch objects are stubbed, every pickle is loaded for real.
import sys, os, io, pickle, struct, tarfile, tempfile
class StorageType:
    def __init__(self, name): self.name = name; self._dtype = name
SIZES = {'FloatStorage': 4, 'LongStorage': 8, 'ByteStorage': 1}
class U(pickle.Unpickler):
    def find_class(self, mod, name):
        if type(name) is str and 'Storage' in name and name in SIZES: return StorageType(name)
        return super().find_class(mod, name)
def load(f): return U(f, encoding='utf-8').load()
def sim(path):
    f = open(path, 'rb')
    assert f.read(4) != b'PK\x03\x04'; f.seek(0)
    objs = {}
    with tarfile.open(fileobj=f, mode='r:', format=tarfile.PAX_FORMAT) as tar, tempfile.TemporaryDirectory() as d:
        print('tar members:', tar.getnames())
        tar.extract('storages', path=d)
        with open(os.path.join(d, 'storages'), 'rb', 0) as g:
            n = load(g)
            for _ in range(n):
                key, loc, st = load(g)
                numel, = struct.unpack('<q', g.read(8)); g.read(numel * SIZES[st.name]); objs[key] = numel
            views = load(g)
        tar.extract('tensors', path=d)
        with open(os.path.join(d, 'tensors'), 'rb', 0) as g:
            n = load(g)
            for i in range(n):
                args = load(g)           # torch: ONE pickle per tensor
                print('tensor args', i, args)
                key, sid, _ = args
                objs[sid]
                ndim, = struct.unpack('<i', g.read(4)); g.read(4)
                g.read(16 * ndim); off, = struct.unpack('<q', g.read(8))
        p = tar.extractfile('pickle')
        print('pickle ->', U(p, encoding='utf-8').load())
if __name__ == '__main__':
    sim(sys.argv[1])
