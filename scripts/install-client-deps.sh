#!/usr/bin/env bash
# Installs the stock libSQL clients that server/hrana's conformance tests drive:
# @libsql/client (node) under /root/.cache/sluice-tools/node_modules and
# libsql-client (PyPI) for python3. Versions are pinned so a fresh machine
# tests against exactly the clients the tests were written for.
set -euo pipefail

TOOLS="${SLUICE_TOOLS:-/root/.cache/sluice-tools}"
NODE_CLIENT_VERSION=0.18.0
PY_CLIENT_VERSION=0.3.1

command -v node >/dev/null || { echo "node is required (apt-get install nodejs npm)" >&2; exit 1; }
command -v npm >/dev/null || { echo "npm is required (apt-get install npm)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required (apt-get install python3 python3-pip)" >&2; exit 1; }

mkdir -p "$TOOLS"
if [ "$(node -p "try{require('$TOOLS/node_modules/@libsql/client/package.json').version}catch(e){''}")" != "$NODE_CLIENT_VERSION" ]; then
  npm install --no-audit --no-fund --prefix "$TOOLS" "@libsql/client@$NODE_CLIENT_VERSION"
fi

if [ "$(python3 -c "import importlib.metadata as m; print(m.version('libsql-client'))" 2>/dev/null || true)" != "$PY_CLIENT_VERSION" ]; then
  python3 -m pip install --quiet "libsql-client==$PY_CLIENT_VERSION"
fi

echo "clients ready: @libsql/client $NODE_CLIENT_VERSION in $TOOLS/node_modules, libsql-client $PY_CLIENT_VERSION"
