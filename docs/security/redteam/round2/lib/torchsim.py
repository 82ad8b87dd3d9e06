# Mimic torch.load(path, weights_only=False)'s legacy path up to the 2nd pickle.load.
import sys, pickle, tarfile
def sim(path, buffering=-1):
    with open(path, 'rb', buffering) as f:
        assert f.read(4) != b'PK\x03\x04'; f.seek(0)            # _is_zipfile
        try:
            tarfile.open(fileobj=f, mode='r:', format=tarfile.PAX_FORMAT); return 'TAR?!'
        except tarfile.TarError:
            f.seek(0)
        m = pickle.load(f, encoding='utf-8')
        if m != 0x1950a86a20f9469cfc6c: return 'bad magic'
        return ('2nd pickle ->', pickle.load(f, encoding='utf-8'))
if __name__ == '__main__':
    for b in [-1, 4096, 8192, 65536, 1 << 20, 4 << 20]:
        print('buffering', b, sim(sys.argv[1], b))
