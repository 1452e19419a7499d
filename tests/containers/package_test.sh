#!/usr/bin/env bash
# Usage: tests/containers/package_test.sh [BUILD_DIR]
#
# The Debian package, installed where nothing else is: CPack builds the .deb from
# BUILD_DIR (default <repo>/build, already built), then a clean container of the
# locally made debian:bookworm base image
#   - installs it with apt-get install ./denormd_*.deb (its declared dependencies
#     come from Debian's archive),
#   - runs denormd --help and denormd check -c /etc/denormd/denormd.yaml, the latter
#     also as the service's user denormd (which postinst created),
#   - checks where the files went (binary, man page, config, env file 0600, unit,
#     sysusers.d),
#   - lints the installed unit with systemd-analyze verify and
#     systemd-analyze security --offline (systemd installed in the container: this
#     machine's own systemd is not PID 1 and has no denormd in /usr/bin),
#   - removes and purges the package, and installs it again now that systemd is
#     there (the user then comes from systemd-sysusers rather than useradd).
# Also checks that the man page mentions every option of denormd --help.
#
# Exit 0 pass, 1 fail, 77 skip (no podman and no way to install it). Registered in
# ctest with LABELS containers (cmake/container_tests.cmake).
set -euo pipefail

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="$(cd "${1:-$REPO_DIR/build}" && pwd)"
CONTAINERS=(bash "$REPO_DIR/scripts/containers.sh")
BASE_IMAGE=docker.io/library/debian:bookworm
# systemd-analyze security --offline: exposure x 10 at most (the unit scores 1.3).
MAX_EXPOSURE=20
T0=$SECONDS

step() { echo "==> [$((SECONDS - T0)) s] $*" >&2; }
fail() { echo "FAIL: $*" >&2; exit 1; }

if [[ $EUID -ne 0 ]] && ! command -v podman >/dev/null; then
  echo "SKIP: podman is not installed and this is not root" >&2
  exit 77
fi
[[ -x "$BUILD_DIR/denormd" ]] || fail "no $BUILD_DIR/denormd; build first"
[[ -f "$BUILD_DIR/CPackConfig.cmake" ]] || fail "no CPackConfig.cmake in $BUILD_DIR (cmake/packaging.cmake not included?)"

step "the man page covers every option of denormd --help"
missing=""
for opt in $("$BUILD_DIR/denormd" --help | grep -oE -- '--[a-z][a-z-]+' | sort -u); do
  grep -qF -- "$(sed 's/-/\\-/g' <<<"$opt")" "$REPO_DIR/docs/denormd.1" || missing+=" $opt"
done
[[ -z "$missing" ]] || fail "docs/denormd.1 does not mention:$missing"

step "cpack -G DEB in $BUILD_DIR"
rm -f "$BUILD_DIR"/denormd_*.deb
(cd "$BUILD_DIR" && cpack -G DEB >"$BUILD_DIR/cpack.log" 2>&1) \
  || { tail -n 30 "$BUILD_DIR/cpack.log" >&2; fail "cpack failed"; }
debs=("$BUILD_DIR"/denormd_*.deb)
[[ ${#debs[@]} -eq 1 && -f "${debs[0]}" ]] || fail "cpack made no single denormd_*.deb"
deb="${debs[0]}"
depends="$(dpkg-deb -f "$deb" Depends)"
echo "    $(basename "$deb"): Depends: $depends" >&2
for lib in libpqxx-6.4 librdkafka++1 libyaml-cpp0.7 libstdc++6 libc6; do
  grep -qE "(^|, )$(sed 's/[+.]/\\&/g' <<<"$lib")( |,|$)" <<<"$depends" || fail "Depends lacks $lib"
done
dpkg-deb -I "$deb" conffiles | grep -qx /etc/denormd/denormd.yaml || fail "denormd.yaml is not a conffile"
dpkg-deb -I "$deb" conffiles | grep -qx /etc/denormd/denormd.env || fail "denormd.env is not a conffile"

step "base image"
"${CONTAINERS[@]}" setup

step "installing the package in a clean $BASE_IMAGE container"
script='
set -eu
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends /tmp/pkg/denormd.deb >/tmp/install.log 2>&1 \
  || { cat /tmp/install.log; exit 1; }
echo "--- denormd --help"
denormd --help | head -n 3
echo "--- denormd check -c /etc/denormd/denormd.yaml"
denormd check -c /etc/denormd/denormd.yaml
echo "--- the same as the service user"
id denormd
setpriv --reuid=denormd --regid=denormd --clear-groups denormd check -c /etc/denormd/denormd.yaml
echo "--- files"
for f in /usr/bin/denormd /usr/share/man/man1/denormd.1.gz /usr/share/doc/denormd/configuration.md \
         /etc/denormd/denormd.yaml /etc/denormd/denormd.env /usr/lib/systemd/system/denormd.service \
         /usr/lib/sysusers.d/denormd.conf; do
  test -f "$f" || { echo "missing $f"; exit 1; }
done
test "$(stat -c %a:%U /etc/denormd/denormd.env)" = 600:root || { echo "denormd.env is $(stat -c %a:%U /etc/denormd/denormd.env)"; exit 1; }
grep -q "^ExecStart=/usr/bin/denormd run -c /etc/denormd/denormd.yaml" /usr/lib/systemd/system/denormd.service
zcat /usr/share/man/man1/denormd.1.gz | grep -q "^.SH NAME"
echo "files in place; denormd.env 0600 root"
echo "--- systemd-analyze verify / security (systemd and man-db installed for the lint)"
apt-get install -y -q --no-install-recommends systemd man-db >/tmp/systemd.log 2>&1 \
  || { cat /tmp/systemd.log; exit 1; }
out="$(systemd-analyze verify /usr/lib/systemd/system/denormd.service 2>&1)" || { echo "$out"; exit 1; }
[ -z "$out" ] || { echo "systemd-analyze verify warns:"; echo "$out"; exit 1; }
echo "systemd-analyze verify: no warnings"
systemd-analyze security --offline=yes --threshold='"$MAX_EXPOSURE"' --no-pager \
  /usr/lib/systemd/system/denormd.service | tail -n 1
echo "--- remove, purge"
apt-get remove -y -q denormd >/dev/null
test ! -e /usr/bin/denormd
test -f /etc/denormd/denormd.yaml
apt-get purge -y -q denormd >/dev/null
test ! -e /etc/denormd/denormd.yaml
echo "removed and purged"
echo "--- again with systemd present: the user comes from systemd-sysusers"
userdel denormd
apt-get install -y -q --no-install-recommends /tmp/pkg/denormd.deb >/dev/null 2>&1
getent passwd denormd
test "$(getent passwd denormd | cut -d: -f7)" = /usr/sbin/nologin
'
mkdir -p "$BUILD_DIR/package-test"
cp "$deb" "$BUILD_DIR/package-test/denormd.deb"
"${CONTAINERS[@]}" podman run --rm --pull=never -v "$BUILD_DIR/package-test:/tmp/pkg:ro" \
  "$BASE_IMAGE" bash -c "$script" 2>&1 | sed 's/^/    /' >&2 \
  || fail "the package test in the container failed"
rm -rf "$BUILD_DIR/package-test"
echo "package test: passed in $((SECONDS - T0)) s" >&2
