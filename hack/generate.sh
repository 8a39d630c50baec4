#!/usr/bin/env bash
# Regenerates the Go code for the plugin protocol from its .proto.
#   hack/generate.sh pluginapi           write pluginapi/internal/...
#   hack/generate.sh --check pluginapi   fail if the committed code is stale
set -euo pipefail
cd "$(dirname "$0")/.."

check=false
if [ "${1:-}" = --check ]; then check=true; shift; fi
module="${1:-pluginapi}"

command -v protoc >/dev/null || { echo "protoc is missing: run make deps (Debian package protobuf-compiler)" >&2; exit 1; }
gen_go=$(hack/tools.sh protoc-gen-go)
gen_grpc=$(hack/tools.sh protoc-gen-go-grpc)

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
protos=$(cd "$module/proto" && find . -name '*.proto' | sort)
(cd "$module/proto" && protoc -I . \
  --plugin=protoc-gen-go="$gen_go" --plugin=protoc-gen-go-grpc="$gen_grpc" \
  --go_out="$out" --go_opt=module=github.com/kipcell/kip/$module \
  --go-grpc_out="$out" --go-grpc_opt=module=github.com/kipcell/kip/$module \
  $protos)

generated=$(cd "$out" && find . -name '*.go' | sort)
if $check; then
  stale=""
  for f in $generated; do
    cmp -s "$out/$f" "$module/$f" || stale="$stale $module/${f#./}"
  done
  if [ -n "$stale" ]; then
    echo "generated code is stale:$stale; run make generate" >&2
    exit 1
  fi
  echo "generated code is up to date"
else
  for f in $generated; do
    mkdir -p "$(dirname "$module/$f")"
    cp "$out/$f" "$module/$f"
  done
  echo "generated:" $generated
fi
