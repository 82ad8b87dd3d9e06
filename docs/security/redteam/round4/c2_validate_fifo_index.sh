#!/bin/sh
# validate DIR passes (rc 0) when the index is a FIFO / a symlink to /dev/zero; inspect/merge refuse it.
ST=${ST:-safetensors}; H=$(cd "$(dirname "$0")" && pwd); D=${TMPDIR:-/tmp}/redteam4-c2; rm -rf $D; mkdir -p $D
python3 -c "import sys; sys.path.insert(0,'$H'); from mkshard import model; model('$D/m')"
rm $D/m/model.safetensors.index.json; mkfifo $D/m/model.safetensors.index.json
$ST validate $D/m; echo "validate rc=$?"; $ST inspect $D/m; echo "inspect rc=$?"
