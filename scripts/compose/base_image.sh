#!/usr/bin/env bash
# Makes the Debian base image the compose check builds on, where no registry can be reached:
# `debootstrap --variant=minbase` of a Debian suite from the package archive, then
# `docker import`. Like Debian's official images: services never start during a build
# (policy-rc.d), no apt lists or caches kept. The root file system is cached as a tarball.
#
# Usage: base_image.sh IMAGE_TAG CACHE_DIR [SUITE] [MIRROR]
#   defaults: SUITE=bookworm, MIRROR=http://deb.debian.org/debian
set -Eeuo pipefail

tag=$1 cache=$2 suite=${3:-bookworm} mirror=${4:-http://deb.debian.org/debian}
tarball=$cache/rootfs-$suite.tar

if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "base image $tag: present"
    exit 0
fi
if [ ! -s "$tarball" ]; then
    command -v debootstrap >/dev/null || {
        echo "error: debootstrap is missing (apt-get install debootstrap)" >&2; exit 1; }
    root=$(mktemp -d "$cache/rootfs-$suite.XXXXXX")
    trap 'rm -rf "$root"' EXIT
    echo "debootstrap $suite from $mirror (log: $cache/debootstrap.log)"
    nice debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 \
        || { echo "error: debootstrap failed; see $cache/debootstrap.log" >&2; exit 1; }
    printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
    chmod 755 "$root/usr/sbin/policy-rc.d"
    printf 'APT::Install-Recommends "false";\n' >"$root/etc/apt/apt.conf.d/90tuner-no-recommends"
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
    tar -C "$root" --numeric-owner -cf "$tarball.part" .
    mv "$tarball.part" "$tarball"
fi
docker import -c 'CMD ["/bin/bash"]' -m "debootstrap --variant=minbase $suite $mirror" \
    "$tarball" "$tag" >/dev/null
echo "base image $tag: imported from $tarball"
