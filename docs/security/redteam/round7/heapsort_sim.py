def lower(b): return bytes(c+32 if 65<=c<=90 else c for c in b)
def less(names, l, r):
    a, b = lower(names[l]), lower(names[r]); m = min(len(a), len(b))
    for i in range(m):
        if a[i] != b[i]: return a[i] < b[i]
    return len(a) < len(b)
def sort(names):
    size = len(names); idx = list(range(size))
    if size <= 1: return idx
    start = (size - 2) >> 1
    while True:
        root = start
        while True:
            child = 2*root+1
            if child >= size: break
            if child+1 < size and less(names, idx[child], idx[child+1]): child += 1
            if not less(names, idx[root], idx[child]): break
            idx[root], idx[child] = idx[child], idx[root]; root = child
        if not start: break
        start -= 1
    end = size - 1
    while end > 0:
        idx[end], idx[0] = idx[0], idx[end]; root = 0
        while True:
            child = 2*root+1
            if child >= end: break
            if child+1 < end and less(names, idx[child], idx[child+1]): child += 1
            if not less(names, idx[root], idx[child]): break
            idx[root], idx[child] = idx[child], idx[root]; root = child
        end -= 1
    return idx
def locate(names, key):
    idx = sort(names); key = lower(key); lo, hi = 0, len(idx)-1
    while lo <= hi:
        m = lo + ((hi-lo) >> 1); k = lower(names[idx[m]])
        if k == key: return idx[m]
        if k < key: lo = m+1
        else: hi = m-1
if __name__ == '__main__':
    for names in ([b'archive/a.pkl', b'archive/DATA.PKL', b'archive/data.pkl', b'archive/version'],
                  [b'archive/a.pkl', b'archive/DATA.PKL', b'archive/data.pkl', b'archive/version', b'archive/zz'],
                  [b'archive/a.pkl', b'archive/DATA.PKL', b'archive/data.pkl']):
        print([n.decode() for n in names], '->', names[locate(names, b'archive/data.pkl')])
