#!/usr/bin/env bash
# Enforces the dependency direction of ARCHITECTURE.md:
#   cmd → host → pluginapi ← plugins,   host → cell/api ← cell
# - pluginapi imports only the standard library, gRPC, protobuf, go-plugin
#   and hclog, and nothing of host, cell, client-go or any plugin;
# - a plugin imports neither host, cell, Kubernetes nor another plugin;
# - cell never imports host;
# - the kip binary links no plugin and no cloud SDK;
# - an example plugin (examples/*, a standalone module outside go.work)
#   imports only pluginapi and the standard library, as the guide says.
set -euo pipefail
cd "$(dirname "$0")/.."

fail=0
bad() { echo "dependency direction: $*" >&2; fail=1; }

# deps DIR PATTERN...: every package (transitively) linked by PATTERN in DIR.
deps() { local dir=$1; shift; (cd "$dir" && go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "$@" | sort -u); }
# forbid DESCRIPTION DEPS REGEX: fail for every dep matching REGEX.
forbid() {
  local what=$1 list=$2 re=$3 hits
  hits=$(grep -E "$re" <<<"$list" || true)
  [ -z "$hits" ] || bad "$what links $(tr '\n' ' ' <<<"$hits")"
}

# pluginapi: direct imports of its non-test packages must be in the allow-list.
allowed='^(github\.com/kipcell/kip/pluginapi|google\.golang\.org/grpc|google\.golang\.org/protobuf|github\.com/hashicorp/go-plugin|github\.com/hashicorp/go-hclog)(/|$)'
while read -r pkg imports; do
  for imp in $imports; do
    case "$imp" in *.*/*) ;; *) continue ;; esac   # standard library
    grep -qE "$allowed" <<<"$imp" || bad "pluginapi package $pkg imports $imp (allowed: stdlib, grpc, protobuf, go-plugin, hclog)"
  done
done < <(cd pluginapi && go list -f '{{.ImportPath}} {{join .Imports " "}}' ./...)
list=$(deps pluginapi ./...)
forbid "pluginapi" "$list" '^(github\.com/kipcell/kip/(host|cell|plugins)|k8s\.io/)'

# plugins: nothing of host, cell, Kubernetes or another plugin.
for dir in plugins/*/; do
  name=$(basename "$dir")
  [ -f "$dir/go.mod" ] || continue
  list=$(deps "$dir" ./...)
  forbid "plugin $name" "$list" '^(github\.com/kipcell/kip/(host|cell)(/|$)|k8s\.io/|sigs\.k8s\.io/)'
  others=$(grep -E '^github\.com/kipcell/kip/plugins/' <<<"$list" | grep -v "^github.com/kipcell/kip/plugins/$name\(/\|\$\)" || true)
  [ -z "$others" ] || bad "plugin $name links another plugin: $others"
done

# Example plugins: their packages and tests import only their own module,
# pluginapi and the standard library. They are built as third parties build
# them, outside the workspace (GOWORK=off).
for dir in examples/*/; do
  [ -f "$dir/go.mod" ] || continue
  own=$(cd "$dir" && GOWORK=off go list -m)
  while read -r pkg imports; do
    for imp in $imports; do
      case "$imp" in *.*/*) ;; *) continue ;; esac   # standard library
      case "$imp" in "$own"|"$own"/*|github.com/kipcell/kip/pluginapi|github.com/kipcell/kip/pluginapi/*) continue ;; esac
      bad "example package $pkg imports $imp (allowed: stdlib, github.com/kipcell/kip/pluginapi)"
    done
  done < <(cd "$dir" && GOWORK=off go list -f '{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./...)
done

# cell/api, shared by host and cell, imports only the standard library, gRPC and protobuf.
allowed_cellapi='^(github\.com/kipcell/kip/cell/api|google\.golang\.org/grpc|google\.golang\.org/protobuf)(/|$)'
if [ -d cell/api ]; then
  while read -r pkg imports; do
    for imp in $imports; do
      case "$imp" in *.*/*) ;; *) continue ;; esac
      grep -qE "$allowed_cellapi" <<<"$imp" || bad "cell/api package $pkg imports $imp (allowed: stdlib, grpc, protobuf)"
    done
  done < <(go list -f '{{.ImportPath}} {{join .Imports " "}}' ./cell/api/...)
fi

# cell never imports host.
if [ -d cell ]; then
  list=$(deps . ./cell/...)
  forbid "cell" "$list" '^github\.com/kipcell/kip/host(/|$)'
fi

# The kip binary links no plugin and no cloud SDK.
list=$(deps . ./cmd/kip)
forbid "cmd/kip" "$list" '^(github\.com/kipcell/kip/plugins/|github\.com/aws/|cloud\.google\.com/|github\.com/Azure/)'

[ $fail -eq 0 ] && echo "dependency direction ok"
exit $fail
