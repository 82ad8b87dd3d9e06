#!/usr/bin/env bash
# lean-build.sh: what a newcomer pays for the README's first command on empty
# Go caches, and what `safetensors --help` costs next to `cat`.
#
#   scripts/lean-build.sh [-tags TAGS]
#
# It runs `go run ./cmd/safetensors inspect testdata/torch/tiny_transformer.safetensors`
# with a fresh GOMODCACHE and GOCACHE in a temporary directory (so it
# downloads every module and compiles everything, the standard library
# included), reports wall time, bytes downloaded (the module zips and
# go.mod files in cache/download) and the module cache's size on disk, then
# builds the binary and times `safetensors --help` against `cat` of a small
# file (minimum over 200 runs each; load on the machine is printed too).
# Run on demand; docs/build.md records the results.
set -euo pipefail
cd "$(dirname "$0")/.."
tags=""
if [ "${1:-}" = "-tags" ]; then tags="$2"; fi
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
export GOMODCACHE="$tmp/mod" GOCACHE="$tmp/cache" GOFLAGS=-buildvcs=false
first=(go run ${tags:+-tags "$tags"} ./cmd/safetensors inspect testdata/torch/tiny_transformer.safetensors)
echo "== ${first[*]} (empty caches; load $(cut -d' ' -f1-3 /proc/loadavg))"
start=$(date +%s.%N)
/usr/bin/time -f "%M %U %S" -o "$tmp/rss" "${first[@]}" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
end=$(date +%s.%N)
dl=$(du -sb "$GOMODCACHE/cache/download" | cut -f1)
disk=$(du -sb "$GOMODCACHE" | cut -f1)
read -r rss usr sys <"$tmp/rss"
printf 'first run: %.0f s wall, %.0f s CPU (user+sys), downloaded %d MB, module cache %d MB, peak RSS %d MB\n' \
	"$(echo "$end - $start" | bc)" "$(echo "$usr + $sys" | bc)" $((dl / 1000000)) $((disk / 1000000)) $((rss / 1024))
bin="$tmp/safetensors"
go build ${tags:+-tags "$tags"} -o "$bin" ./cmd/safetensors
echo "binary: $(($(stat -c %s "$bin") / 1000000)) MB; packages: $(go list ${tags:+-tags "$tags"} -deps ./cmd/safetensors | wc -l)"
/usr/bin/time -f "%M" -o "$tmp/rss" "$bin" --help >/dev/null
echo "safetensors --help: peak RSS $(($(cat "$tmp/rss") / 1024)) MB"
min_ms() { # min wall time of 200 runs of "$@", in ms
	local best=999999999 s e d
	for _ in $(seq 200); do
		s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s%N)
		d=$(((e - s) / 1000)); [ "$d" -lt "$best" ] && best=$d
	done
	echo "$best"
}
c=$(min_ms cat go.mod); h=$(min_ms "$bin" --help)
echo "safetensors --help: $h us vs cat $c us: $(echo "scale=1; $h / $c" | bc)x (load $(cut -d' ' -f1 /proc/loadavg))"
