# Writes a sharded PyTorch checkpoint the way transformers' save_pretrained
# (safe_serialization=False, torch 1.13) lays one out: state-dict shards
# pytorch_model-0000N-of-0000M.bin written with torch.save, and
# pytorch_model.bin.index.json ({"metadata": {"total_size"}, "weight_map"}),
# keys sorted, indent 2. The model is GPT-2 shaped and tiny: 12 layers h.0 …
# h.11, lm_head.weight tied to transformer.wte.weight (one tensor, two
# names, in the first shard), and a layer split across a shard boundary.
# expected.json records each name's dtype, shape and sha256 of its
# C-contiguous little-endian bytes.
#
#   /usr/bin/python3 make.py   (torch 1.13)
import collections, hashlib, json, os
import torch

torch.manual_seed(0)
sd = collections.OrderedDict()
wte = torch.randn(16, 8)
sd["transformer.wte.weight"] = wte
for i in range(12):
    sd[f"transformer.h.{i}.ln_1.weight"] = torch.randn(8)
    sd[f"transformer.h.{i}.attn.c_attn.weight"] = torch.randn(8, 8).to(torch.bfloat16)
sd["transformer.ln_f.weight"] = torch.randn(8)
sd["lm_head.weight"] = wte  # tied

# transformers' shard_checkpoint: fill shards up to max_shard_size in
# state-dict order; a tensor whose storage is in a shard already goes into
# that shard, uncounted.
max_size, shards, cur, cur_size, block_of = 600, [], collections.OrderedDict(), 0, {}
for k, v in sd.items():
    sid = v.untyped_storage().data_ptr() if hasattr(v, "untyped_storage") else v.storage().data_ptr()
    if sid in block_of:
        (shards + [cur])[block_of[sid]][k] = v
        continue
    size = v.numel() * v.element_size()
    if cur and cur_size + size > max_size:
        shards.append(cur)
        cur, cur_size = collections.OrderedDict(), 0
    cur[k] = v
    cur_size += size
    block_of[sid] = len(shards)
shards.append(cur)

here = os.path.dirname(os.path.abspath(__file__))
n = len(shards)
weight_map, total = {}, 0
for i, shard in enumerate(shards):
    name = f"pytorch_model-{i + 1:05d}-of-{n:05d}.bin"
    torch.save(shard, os.path.join(here, name))
    for k, v in shard.items():
        weight_map[k] = name
        total += v.numel() * v.element_size()  # transformers counts tied names twice
with open(os.path.join(here, "pytorch_model.bin.index.json"), "w") as f:
    f.write(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2, sort_keys=True) + "\n")

expected = {}
for k, v in sd.items():
    b = v.contiguous().view(torch.uint8).numpy().tobytes() if v.dtype != torch.bfloat16 else v.contiguous().view(torch.int16).numpy().tobytes()
    expected[k] = {"dtype": {torch.float32: "F32", torch.bfloat16: "BF16"}[v.dtype], "shape": list(v.shape),
                   "sha256": hashlib.sha256(b).hexdigest(), "shard": weight_map[k]}
with open(os.path.join(here, "expected.json"), "w") as f:
    f.write(json.dumps(expected, indent=1, sort_keys=True) + "\n")
print(n, "shards", total, "bytes")
