import json, struct, sys, os
def write_st(path, tensors, meta=None):
    hdr = {}; off = 0; blobs = []
    for name, (dtype, shape, data) in tensors.items():
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data); blobs.append(data)
    if meta: hdr["__metadata__"] = meta
    h = json.dumps(hdr).encode(); h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(blobs))
def model(d, nshards=2, per=2, nbytes=64, shardname=lambda i, n: f"model-{i+1:05d}-of-{n:05d}.safetensors"):
    os.makedirs(d, exist_ok=True)
    wm = {}
    for i in range(nshards):
        sn = shardname(i, nshards); ts = {}
        for j in range(per):
            tn = f"layer{i}.w{j}"; ts[tn] = ("F32", [nbytes // 4], bytes([(i * 7 + j) % 256]) * nbytes); wm[tn] = sn
        write_st(os.path.join(d, sn), ts)
    json.dump({"metadata": {"total_size": nshards * per * nbytes}, "weight_map": wm}, open(os.path.join(d, "model.safetensors.index.json"), "w"))
    return wm
if __name__ == '__main__':
    model(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
