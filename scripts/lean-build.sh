#!/usr/bin/env bash
# lean-build.sh: what a newcomer pays for the README's first command on empty
# Go caches, and what `safetensors --help` costs next to `cat`.
#
#   scripts/lean-build.sh [-tags TAGS] [-trace]
#
# It runs `go run ./cmd/safetensors inspect testdata/torch/tiny_transformer.safetensors`
# with a fresh GOMODCACHE and GOCACHE in a temporary directory (so it
# downloads every module and compiles everything, the standard library
# included), reports wall time, bytes downloaded (the module zips and
# go.mod files in cache/download) and the module cache's size on disk, then
# builds the binary and times `safetensors --help` against `cat` of a small
# file (200 runs each, interleaved, median and minimum, timed with bash's
# EPOCHREALTIME so no `date` process is counted; load on the machine is
# printed too). With -trace the first run writes the go command's action
# trace and the script prints the 15 packages whose compile took longest.
# Run on demand; docs/build.md records the results.
set -euo pipefail
cd "$(dirname "$0")/.."
tags="" trace=""
while [ $# -gt 0 ]; do
	case "$1" in
	-tags) tags="$2"; shift 2 ;;
	-trace) trace=1; shift ;;
	*) echo "usage: $0 [-tags TAGS] [-trace]" >&2; exit 2 ;;
	esac
done
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
export GOMODCACHE="$tmp/mod" GOCACHE="$tmp/cache" GOFLAGS=-buildvcs=false
first=(go run ${tags:+-tags "$tags"} ${trace:+-debug-trace="$tmp/trace.json"} ./cmd/safetensors inspect testdata/torch/tiny_transformer.safetensors)
echo "== ${first[*]} (empty caches; load $(cut -d' ' -f1-3 /proc/loadavg))"
start=$(date +%s.%N)
/usr/bin/time -f "%M %U %S" -o "$tmp/rss" "${first[@]}" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
end=$(date +%s.%N)
dl=$(du -sb "$GOMODCACHE/cache/download" | cut -f1)
disk=$(du -sb "$GOMODCACHE" | cut -f1)
read -r rss usr sys <"$tmp/rss"
printf 'first run: %.0f s wall, %.0f s CPU (user+sys), downloaded %d MB, module cache %d MB, peak RSS %d MB\n' \
	"$(echo "$end - $start" | bc)" "$(echo "$usr + $sys" | bc)" $((dl / 1000000)) $((disk / 1000000)) $((rss / 1024))
if [ -n "$trace" ]; then
	# the longest compile actions of the first run ("build PKG" spans)
	python3 - "$tmp/trace.json" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))
begin, spans = {}, []
for e in ev:
    n = e.get("name", "")
    if not n.startswith("Executing action (build ") or "check cache" in n or " -> " in n:
        continue
    k = (n, e.get("tid"))
    if e["ph"] == "B":
        begin[k] = e["ts"]
    elif e["ph"] == "E" and k in begin:
        spans.append((e["ts"] - begin.pop(k), n[len("Executing action (build "):-1]))
spans.sort(reverse=True)
total = sum(d for d, _ in spans)
print(f"compile actions: {len(spans)}, {total/1e6:.0f} s summed over actions (wall, at this load)")
for d, n in spans[:15]:
    print(f"  {d/1e6:6.1f} s  {n}")
def module(p):  # the standard library, else github.com/OWNER/NAME or HOST/NAME
    parts = p.split("/")
    if "." not in parts[0]:
        return "std"
    return "/".join(parts[:3] if parts[0] == "github.com" else parts[:2])
by = {}
for d, n in spans:
    by[module(n)] = by.get(module(n), 0) + d
print("compile time by module (share of the summed action time):")
for m, d in sorted(by.items(), key=lambda kv: -kv[1])[:12]:
    print(f"  {100*d/total:5.1f}%  {m}")
PY
fi
bin="$tmp/safetensors"
go build ${tags:+-tags "$tags"} -o "$bin" ./cmd/safetensors
echo "binary: $(($(stat -c %s "$bin") / 1000000)) MB; packages: $(go list ${tags:+-tags "$tags"} -deps ./cmd/safetensors | wc -l)"
/usr/bin/time -f "%M" -o "$tmp/rss" "$bin" --help >/dev/null
echo "safetensors --help: peak RSS $(($(cat "$tmp/rss") / 1024)) MB"
# median and minimum of 200 interleaved runs of cat and --help, in µs
declare -a tc th
for _ in $(seq 200); do
	s=${EPOCHREALTIME/./}; cat go.mod >/dev/null; e=${EPOCHREALTIME/./}; tc+=($((e - s)))
	s=${EPOCHREALTIME/./}; "$bin" --help >/dev/null; e=${EPOCHREALTIME/./}; th+=($((e - s)))
done
med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)], a[1]}'; }
read -r cm cmin <<<"$(med "${tc[@]}")"
read -r hm hmin <<<"$(med "${th[@]}")"
echo "safetensors --help: median $hm us vs cat $cm us: $(echo "scale=2; $hm / $cm" | bc)x (min $hmin vs $cmin us: $(echo "scale=2; $hmin / $cmin" | bc)x; load $(cut -d' ' -f1 /proc/loadavg))"
