#!/usr/bin/env bash
# Regenerates the Go code of the project's protobuf contracts, and the
# configuration reference (docs/configuration.md) from the components'
# Config types and the plugins' config schemas (host/config's TestReference).
#   hack/generate.sh           write the generated files
#   hack/generate.sh --check   fail if any committed generated file is stale
#
# Each entry: the folder holding the .proto tree, the module's folder, and the
# module's path (generated files land where their go_package says).
set -euo pipefail
cd "$(dirname "$0")/.."

contracts=(
  "pluginapi/proto pluginapi github.com/kipcell/kip/pluginapi"   # cloud-plugin protocol kip.plugin.v1
  "cell/api/proto  .         github.com/kipcell/kip"             # host↔cell protocol kip.cell.v1
)

check=false
if [ "${1:-}" = --check ]; then check=true; fi

command -v protoc >/dev/null || { echo "protoc is missing: run make deps (Debian package protobuf-compiler)" >&2; exit 1; }
gen_go=$(hack/tools.sh protoc-gen-go)
gen_grpc=$(hack/tools.sh protoc-gen-go-grpc)

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
stale=""
for i in "${!contracts[@]}"; do
  read -r protodir moddir modpath <<<"${contracts[$i]}"
  dest="$out/$i"
  mkdir -p "$dest"
  protos=$(cd "$protodir" && find . -name '*.proto' | sort)
  (cd "$protodir" && protoc -I . \
    --plugin=protoc-gen-go="$gen_go" --plugin=protoc-gen-go-grpc="$gen_grpc" \
    --go_out="$dest" --go_opt=module="$modpath" \
    --go-grpc_out="$dest" --go-grpc_opt=module="$modpath" \
    $protos)
  for f in $(cd "$dest" && find . -name '*.go' | sort); do
    target="${moddir%/}/${f#./}"
    target="${target#./}"
    if $check; then
      cmp -s "$dest/$f" "$target" || stale="$stale $target"
    else
      mkdir -p "$(dirname "$target")"
      cp "$dest/$f" "$target"
      echo "generated $target"
    fi
  done
done

# The configuration reference: its generated part is TestReference's golden.
# -race: the build make test makes of the package, not a second one.
reference=(go test -race -count=1 -run '^TestReference$' ./host/config)
if $check; then
  "${reference[@]}" >"$out/reference.log" 2>&1 ||
    { cat "$out/reference.log" >&2; stale="$stale docs/configuration.md"; }
else
  "${reference[@]}" -update >"$out/reference.log" 2>&1 || { cat "$out/reference.log" >&2; exit 1; }
  echo "generated docs/configuration.md"
fi

if $check; then
  if [ -n "$stale" ]; then
    echo "generated code is stale:$stale; run make generate" >&2
    exit 1
  fi
  echo "generated code is up to date"
fi
