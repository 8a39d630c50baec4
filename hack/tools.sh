#!/usr/bin/env bash
# Pinned developer tools, built once from the Go module proxy into a cache
# outside the repository and reused afterwards.
#   hack/tools.sh dir            print the tools directory
#   hack/tools.sh NAME           print the path of tool NAME, installing it if missing
set -euo pipefail

cache="${XDG_CACHE_HOME:-$HOME/.cache}/kip/tools"

declare -A pkgs=(
  [golangci-lint]="github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0"
  [protoc-gen-go]="google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.11"
  [protoc-gen-go-grpc]="google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.0"
)

[ $# -eq 1 ] || { echo "usage: $0 dir|NAME" >&2; exit 2; }
if [ "$1" = dir ]; then echo "$cache"; exit 0; fi
pkg="${pkgs[$1]:-}"
[ -n "$pkg" ] || { echo "$0: unknown tool $1 (known: ${!pkgs[*]})" >&2; exit 2; }
version="${pkg##*@}"
dir="$cache/$1-$version"
if [ ! -x "$dir/$1" ]; then
  mkdir -p "$dir"
  # make check's kip-prefetch installs golangci-lint in the background while
  # verify may ask for it: the second waits for the first and finds it there.
  exec 9>"$dir/.lock"
  flock 9
  if [ ! -x "$dir/$1" ]; then
    echo "installing $pkg into $dir (once)" >&2
    GOWORK=off GOFLAGS=-mod=mod GOBIN="$dir" go install "$pkg" >&2
  fi
  exec 9>&-
fi
echo "$dir/$1"
