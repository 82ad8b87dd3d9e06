#!/bin/sh
# Ctrl-C during split's commit phase leaves hundreds of final shards (no index) in OUTDIR.
ST=${ST:-safetensors}; H=$(cd "$(dirname "$0")" && pwd); D=${TMPDIR:-/tmp}/redteam4-c3; rm -rf $D; mkdir -p $D
python3 -c "import sys; sys.path.insert(0,'$H'); from mkshard import model; model('$D/m', 3000, 1, 4)"
$ST merge $D/m $D/m.st >/dev/null
$ST split $D/m.st $D/out --max-shard-size 1 >/dev/null 2>&1 & p=$!; sleep 3; kill -INT $p; wait $p; echo "split rc=$?"
echo "files left in OUTDIR: $(ls $D/out | wc -l)"; ls $D/out | tail -2
