#!/bin/sh
# Installs every Debian 12 package that building, testing and benchmarking tprun need; does nothing when all are present.
set -eu

PACKAGES="
build-essential autoconf automake libtool pkg-config
libpmix-dev libhwloc-dev
openmpi-bin libopenmpi-dev mpich libmpich-dev
hyperfine iproute2 openssh-server openssh-client procps python3 python3-matplotlib groff-base
slurm-wlm munge
clang libclang-rt-14-dev
"

die() {
    echo "install-deps.sh: $*" >&2
    exit 1
}

if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "must run as root, and sudo is not installed; rerun as root"
    exec sudo -- "$0" "$@"
fi

command -v dpkg-query >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 ||
    die "needs dpkg-query and apt-get (Debian 12); install the packages by hand: $(echo $PACKAGES)"

# One dpkg-query for all packages keeps the already-installed case fast.
missing_packages() {
    installed=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' $PACKAGES 2>/dev/null | awk '/^ii/ { print $2 }')
    for pkg in $PACKAGES; do
        echo "$installed" | grep -qx "$pkg" || echo "$pkg"
    done
}

missing=$(missing_packages)
if [ -z "$missing" ]; then
    echo "install-deps.sh: all $(echo $PACKAGES | wc -w) packages already installed"
    exit 0
fi
missing=$(echo $missing)
echo "install-deps.sh: installing $missing"

export DEBIAN_FRONTEND=noninteractive
apt-get update || die "apt-get update failed; check /etc/apt/sources.list and the network"
if ! apt-get install -y --no-install-recommends $missing; then
    for pkg in $missing; do
        if ! apt-cache policy "$pkg" 2>/dev/null | grep -q 'Candidate: [^(]'; then
            echo "install-deps.sh: package $pkg has no installation candidate in the configured apt sources" >&2
        fi
    done
    still=$(missing_packages)
    die "apt-get install failed; not installed: $(echo $still)"
fi

still=$(missing_packages)
[ -z "$still" ] || die "apt-get install reported success, but these are still not installed: $(echo $still)"
echo "install-deps.sh: installed $missing"
