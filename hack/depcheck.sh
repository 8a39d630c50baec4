#!/usr/bin/env bash
# Enforces the import rules of docs/architecture.md:
#   cmd → host → pluginapi ← plugins,   host → cell/api ← cell
# - every package of the root module and of pluginapi has a row in the
#   table of docs/architecture.md ("depcheck: import rules"), which says
#   which of Kip's packages it may import (its non-test files) and what it
#   must never link (transitively); this script reads that table;
# - pluginapi imports only the standard library, gRPC, protobuf, go-plugin
#   and hclog; cell/api only the standard library, gRPC and protobuf;
# - nothing under host/ (or cmd/kip) imports a cell package but cell/api and
#   below, not even in tests;
# - a plugin imports neither host, cell, Kubernetes nor another plugin;
# - an example plugin (examples/*, a standalone module outside go.work)
#   imports only pluginapi and the standard library, as the guide says.
set -euo pipefail
cd "$(dirname "$0")/.."

doc=docs/architecture.md
kip=github.com/kipcell/kip
fail=0
bad() { echo "dependency direction: $*" >&2; fail=1; }

# deps DIR PATTERN...: every package (transitively) linked by PATTERN in DIR,
# with GOWORK=off for a module go.work does not list (plugins/gce).
deps() {
  local dir=$1; shift
  local work=
  grep -qE "^[[:space:]]*\./${dir%/}[[:space:]]*\$" go.work || work=off
  (cd "$dir" && GOWORK=${work:-${GOWORK:-}} go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "$@" | sort -u)
}
# few LINES: the first three lines, and how many more.
few() {
  local n
  n=$(wc -l <<<"$1")
  if [ "$n" -le 3 ]; then tr '\n' ' ' <<<"$1" | sed 's/ $//'; else echo "$(head -3 <<<"$1" | tr '\n' ' ')and $((n - 3)) more"; fi
}
# forbid DESCRIPTION DEPS REGEX: fail for every dep matching REGEX.
forbid() {
  local what=$1 list=$2 re=$3 hits
  hits=$(grep -E "$re" <<<"$list" || true)
  [ -z "$hits" ] || bad "$what links $(few "$hits")"
}

# --- The table of docs/architecture.md -------------------------------------
# Its rows: | `package` | what it is | may import, of Kip's packages | never links |
# with Kip's packages named without the module prefix (host/cells), X/...
# standing for X and everything below it, and "—" for none.
declare -A allow=() never=()
patterns=()
while IFS='|' read -r pkg may nev; do
  allow[$pkg]=$may
  never[$pkg]=$nev
  [[ $pkg == */... ]] && patterns+=("$pkg")
done < <(awk -F'|' '
  /<!-- depcheck: import rules/ { on = 1; next }
  on && !/^\|/ { if (rows) exit; next }
  on { rows++ }
  on && rows > 2 {
    for (i = 2; i <= 5; i++) { gsub(/`|—/, "", $i); gsub(/^ +| +$/, "", $i) }
    gsub(/, */, " ", $4)
    printf "%s|%s|%s\n", $2, $4, $5
  }' "$doc")
[ ${#allow[@]} -gt 0 ] || { echo "dependency direction: no import rules found in $doc" >&2; exit 1; }

# covers NAME PATTERN: NAME is PATTERN, or below it when PATTERN ends in /...
covers() { [[ $1 == "$2" ]] || { [[ $2 == */... ]] && [[ $1 == "${2%/...}" || $1 == "${2%/...}"/* ]]; }; }
# row NAME: the table's row for package NAME (exact first, then X/...).
row() {
  local p
  [[ -v allow[$1] ]] && { echo "$1"; return; }
  for p in "${patterns[@]}"; do covers "$1" "$p" && { echo "$p"; return; }; done
  return 1
}
# never_re WORD: the packages a "never links" word stands for.
never_re() {
  case $1 in
    client-go) echo '^k8s\.io/client-go(/|$)' ;;
    kubernetes) echo '^(k8s\.io|sigs\.k8s\.io)/' ;;
    plugins) echo "^${kip//./\\.}/plugins/" ;;
    "cloud SDKs") echo '^(github\.com/aws/|cloud\.google\.com/|google\.golang\.org/api/|github\.com/Azure/)' ;;
    third-party) echo '^[^/]*\.[^/]*/' ;;   # Kip's own are removed before matching
    *) return 1 ;;
  esac
}

for dir in . pluginapi; do
  while read -r pkg imports; do
    name=${pkg#"$kip"/}
    if ! r=$(row "$name"); then
      bad "package $name has no row in $doc's import rules: add one saying what it may import"
      continue
    fi
    for imp in $imports; do
      [[ $imp == "$kip"/* ]] || continue
      own=${imp#"$kip"/} ok=
      for a in ${allow[$r]}; do covers "$own" "$a" && { ok=1; break; }; done
      [ -n "$ok" ] || bad "$name imports $own ($doc allows $name: ${allow[$r]:-nothing of Kip})"
    done
  done < <(cd "$dir" && go list -f '{{.ImportPath}} {{join .Imports " "}}' ./...)
  while read -r pkg list; do
    name=${pkg#"$kip"/}
    r=$(row "$name") || continue
    [ -n "${never[$r]}" ] || continue
    all=$(tr ' ' '\n' <<<"$list")
    IFS=, read -ra words <<<"${never[$r]}"
    for w in "${words[@]}"; do
      w=$(sed 's/^ *//; s/ *$//' <<<"$w")
      re=$(never_re "$w") || { bad "$doc: $name never links \"$w\", a word this script does not define"; continue; }
      hay=$all
      [ "$w" != third-party ] || hay=$(grep -v "^${kip//./\\.}\(/\|\$\)" <<<"$all" || true)
      hits=$(grep -E "$re" <<<"$hay" || true)
      [ -z "$hits" ] || bad "$name links $(few "$hits") ($doc: never $w)"
    done
  done < <(cd "$dir" && go list -f '{{.ImportPath}} {{join .Deps " "}}' ./...)
done

# --- Third-party allow-lists -------------------------------------------------
# pluginapi: direct imports of its non-test packages must be in the allow-list.
allowed='^(github\.com/kipcell/kip/pluginapi|google\.golang\.org/grpc|google\.golang\.org/protobuf|github\.com/hashicorp/go-plugin|github\.com/hashicorp/go-hclog)(/|$)'
while read -r pkg imports; do
  for imp in $imports; do
    case "$imp" in *.*/*) ;; *) continue ;; esac   # standard library
    grep -qE "$allowed" <<<"$imp" || bad "pluginapi package $pkg imports $imp (allowed: stdlib, grpc, protobuf, go-plugin, hclog)"
  done
done < <(cd pluginapi && go list -f '{{.ImportPath}} {{join .Imports " "}}' ./...)

# cell/api, shared by host and cell, imports only the standard library, gRPC and protobuf.
allowed_cellapi='^(github\.com/kipcell/kip/cell/api|google\.golang\.org/grpc|google\.golang\.org/protobuf)(/|$)'
while read -r pkg imports; do
  for imp in $imports; do
    case "$imp" in *.*/*) ;; *) continue ;; esac
    grep -qE "$allowed_cellapi" <<<"$imp" || bad "cell/api package $pkg imports $imp (allowed: stdlib, grpc, protobuf)"
  done
done < <(go list -f '{{.ImportPath}} {{join .Imports " "}}' ./cell/api/...)

# host speaks to a cell through the protocol's public types only: nothing under
# host/ imports a cell package other than cell/api and below (its generated
# code is internal to it), its tests included; a test that needs a real agent
# lives in test/.
while read -r pkg imports; do
  for imp in $imports; do
    case "$imp" in "$kip"/cell|"$kip"/cell/*) ;; *) continue ;; esac
    case "$imp" in "$kip"/cell/api|"$kip"/cell/api/*) [[ $imp != */internal/* ]] && continue ;; esac
    bad "${pkg#"$kip"/} imports ${imp#"$kip"/} (host speaks to cells through cell/api's types only, tests included)"
  done
done < <(go list -f '{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./host/... ./cmd/kip/...)

# --- Plugins -----------------------------------------------------------------
# Nothing of host, cell, Kubernetes or another plugin.
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

[ $fail -eq 0 ] && echo "dependency direction ok"
exit $fail
