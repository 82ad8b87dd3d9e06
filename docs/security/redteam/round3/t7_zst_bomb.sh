#!/bin/sh
# A 1.0 GiB (or 3 GiB) all-zero U8 tensor, compressed with our own tool: ~115 KB (~340 KB) on disk.
# stats / validate --full / get on the compressed file hold the whole decompressed tensor in memory.
set -e; ST=${ST:-safetensors}
GIB=${1:-3}
python3 -c "
import json,struct,sys
n=$GIB<<30
h=json.dumps({'w':{'dtype':'U8','shape':[n],'data_offsets':[0,n]}}).encode(); h+=b' '*(-len(h)%8)
f=open('zeros${GIB}g.safetensors','wb'); f.write(struct.pack('<Q',len(h))+h); f.truncate(8+len(h)+n)"
"$ST" compress --frame-size 64MiB -f zeros${GIB}g.safetensors
rm zeros${GIB}g.safetensors
