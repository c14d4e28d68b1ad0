#!/bin/sh
# fresh_machine.sh - README's newcomer path on a machine without srgeo's
# packages: a Debian 12 minbase chroot (debootstrap) gets a copy of the tree
# at COMMIT and nothing but `make`, then runs README's two commands, timed:
#   make demo   (installs the packages, builds, runs the demo: one pass)
#   make test
# Root only; needs debootstrap and the Debian mirror (apt's sources).  Not
# part of `make test` (it downloads ~400 MB and takes 10-20 minutes).
#   sh tests/fresh_machine.sh [COMMIT] [DIR]
# DIR (default /var/tmp/srgeo-fresh) keeps the pristine chroot in DIR/base,
# so later runs skip debootstrap; each run works in a copy, DIR/run.
# Exit status: that of the first command that failed.
set -e
commit=${1:-HEAD}
dir=${2:-/var/tmp/srgeo-fresh}
repo=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "fresh_machine: needs root (chroot, debootstrap)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "fresh_machine: apt-get install debootstrap first" >&2; exit 2; }
mkdir -p "$dir"
if [ ! -x "$dir/base/bin/sh" ]; then
    debootstrap --variant=minbase bookworm "$dir/base.tmp" http://deb.debian.org/debian
    mv "$dir/base.tmp" "$dir/base"
fi
r=$dir/run
cleanup() {
    for m in proc sys dev/pts dev; do umount "$r/$m" 2>/dev/null || true; done
}
cleanup
rm -rf "$r"
cp -a "$dir/base" "$r"
trap cleanup EXIT
mount -t proc proc "$r/proc"
# a real machine has sysfs: Open MPI's hwloc reads the CPU topology there
mount -t sysfs sysfs "$r/sys"
mount --bind /dev "$r/dev"
mount --bind /dev/pts "$r/dev/pts"
cp /etc/resolv.conf "$r/etc/resolv.conf"
mkdir -p "$r/srgeo"
git -C "$repo" archive "$commit" | tar -x -C "$r/srgeo"
in_root() { chroot "$r" /usr/bin/env -i HOME=/root TERM=dumb PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin sh -c "$1"; }
echo "== fresh_machine: $(git -C "$repo" rev-parse --short "$commit") in $r; installing make only"
in_root 'apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends make >/dev/null'
in_root 'command -v pkg-config lua5.4 cc || true; echo "(none of pkg-config, lua5.4, cc above: a fresh machine)"'
for c in "make demo" "make test"; do
    echo "== fresh_machine: $c"
    t0=$(date +%s)
    set +e
    in_root "cd /srgeo && $c"
    rc=$?
    set -e
    echo "== fresh_machine: $c exited $rc after $(( $(date +%s) - t0 )) s"
    [ "$rc" -eq 0 ] || exit "$rc"
done
