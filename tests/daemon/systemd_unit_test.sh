#!/usr/bin/env bash
# Usage: tests/daemon/systemd_unit_test.sh DENORMD_BINARY
#
# Lints deploy/systemd/denormd.service with this machine's
# `systemd-analyze verify` (no running systemd needed): the unit's
# /usr/bin/denormd is rewritten to DENORMD_BINARY, as the install rewrites it
# to the real prefix, and man:denormd(1) is found through MANPATH in the source
# tree. Any warning fails. tests/containers/package_test.sh lints the unit the
# package installs, in a clean container; this runs with the rest of the suite.
#
# Exit 0 pass, 1 fail, 77 skip (no systemd-analyze here).
set -euo pipefail

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BINARY="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
command -v systemd-analyze >/dev/null || { echo "SKIP: no systemd-analyze" >&2; exit 77; }
[[ -x "$BINARY" ]] || { echo "FAIL: no $BINARY" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/man/man1"
cp "$REPO_DIR/docs/denormd.1" "$work/man/man1/"
sed "s#/usr/bin/denormd#$BINARY#g" "$REPO_DIR/deploy/systemd/denormd.service" >"$work/denormd.service"
out="$(MANPATH="$work/man" systemd-analyze verify "$work/denormd.service" 2>&1)" \
  || { echo "$out" >&2; echo "FAIL: systemd-analyze verify" >&2; exit 1; }
[[ -z "$out" ]] || { echo "$out" >&2; echo "FAIL: systemd-analyze verify warns" >&2; exit 1; }
echo "systemd-analyze verify denormd.service: no warnings ($(systemd-analyze --version | head -n 1))"
