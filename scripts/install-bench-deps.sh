#!/usr/bin/env bash
# Installs what sluice-bench (bench/) and its tests need beyond scripts/install-test-deps.sh:
# Debian's chromium (renders the HTML report to a screenshot in a test) and
# mariadb-server (the MariaDB peer of `sluice-bench compare`). The MariaDB
# service is never enabled: the bench starts mariadbd itself on a loopback port
# with a temporary datadir and stops it afterwards.
# Idempotent: a second run only checks that the binaries are there.
set -euo pipefail

# Each step line says when it began, in seconds since the script started:
# what each install step costs on this machine.
step() { printf '==> [%ss] %s\n' "$SECONDS" "$*"; }

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if ! command -v mariadbd >/dev/null 2>&1 || ! command -v mariadb-install-db >/dev/null 2>&1; then
	need+=(mariadb-server)
fi

if [ "${#need[@]}" -eq 0 ]; then
	step "chromium and mariadb-server (installed)"
	exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
step "apt-get install ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# policy-rc.d keeps the package from starting a system MariaDB we do not use.
if [ ! -e /usr/sbin/policy-rc.d ]; then
	printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
	$SUDO chmod +x /usr/sbin/policy-rc.d
	trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" fonts-dejavu-core >/dev/null
step "done: $(command -v chromium) $(command -v mariadbd)"
