#!/bin/sh
# stats/diff on a model whose shard another process truncates while it is read: SIGBUS crash.
ST=${ST:-safetensors}; H=$(cd "$(dirname "$0")" && pwd); D=${TMPDIR:-/tmp}/redteam4-c1; rm -rf $D; mkdir -p $D/m
python3 - <<PY
import sys, os, json; sys.path.insert(0, '$H'); from mkshard import write_st
wm = {}
for i in range(2):
    sn = f"model-{i+1:05d}-of-00002.safetensors"
    write_st('$D/m/' + sn, {f"t{i}.{j}": ("F32", [16 << 20], os.urandom(1024) * (64 << 10)) for j in range(2)})
    for j in range(2): wm[f"t{i}.{j}"] = sn
json.dump({"metadata": {}, "weight_map": wm}, open('$D/m/model.safetensors.index.json', 'w'))
PY
$ST stats $D/m >/dev/null 2>$D/err & p=$!; sleep 0.15; truncate -s 1000000 $D/m/model-00002-of-00002.safetensors; wait $p; echo "stats rc=$?"; head -3 $D/err
