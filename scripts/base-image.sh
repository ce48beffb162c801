#!/usr/bin/env bash
# Makes sure the base image the browser image builds FROM exists locally.
#
#   scripts/base-image.sh [amd64|arm64] [--rebuild]      (default: amd64)
#
#   amd64 -> debian:bookworm-slim                    (override: AGENTENV_BASE_AMD64)
#   arm64 -> agentenv/debian:bookworm-slim-arm64     (override: AGENTENV_BASE_ARM64)
#
# In order: use the local image if it is there (with the right architecture);
# else `docker pull` it (bounded by $AGENTENV_PULL_TIMEOUT, default 180 s;
# arm64 pulls debian:bookworm-slim for linux/arm64 and tags it); else build it
# from Debian's mirror with debootstrap (root on Debian; arm64 through qemu,
# see scripts/qemu.sh) and load it into the engine, with the same apt sources as
# Debian's official image (bookworm, bookworm-updates, bookworm-security) and
# its "slim" dpkg excludes. --rebuild skips the first two steps, e.g. to pick
# up Debian's security updates.
#
# Environment: AGENTENV_DEBIAN_MIRROR (default http://deb.debian.org/debian),
# AGENTENV_DEBIAN_SECURITY (default http://deb.debian.org/debian-security),
# AGENTENV_DEBOOTSTRAP_TIMEOUT (seconds, default 900).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=scripts/qemu.sh
. "$(dirname "${BASH_SOURCE[0]}")/qemu.sh"

arch=amd64
rebuild=""
for arg in "$@"; do
    case "$arg" in
        --rebuild) rebuild=1 ;;
        -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
        -*) die "unknown option '$arg'" "usage: scripts/base-image.sh [amd64|arm64] [--rebuild]" ;;
        *) arch="$(normalize_arch "$arg")" ;;
    esac
done

tag="$(base_image_tag "$arch")"
suite=bookworm
mirror="${AGENTENV_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security="${AGENTENV_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}"
pull_timeout="${AGENTENV_PULL_TIMEOUT:-180}"
debootstrap_timeout="${AGENTENV_DEBOOTSTRAP_TIMEOUT:-900}"

docker info >/dev/null 2>&1 || die "no Docker engine answers" "run scripts/engine.sh first"

# --- 1. already here? -------------------------------------------------------
if [ -z "$rebuild" ]; then
    have="$(image_arch "$tag")"
    if [ "$have" = "$arch" ]; then
        exit 0
    elif [ -n "$have" ]; then
        if [ "$arch" = amd64 ]; then
            die "$tag is a $have image, not amd64" \
                "build amd64 on an amd64 machine or with buildx (scripts/build.sh uses buildx when it exists)" \
                "or point AGENTENV_BASE_AMD64 at an amd64 Debian bookworm image"
        fi
        log "$tag is a $have image, not $arch: replacing it"
    fi
fi

# --- 2. pull ------------------------------------------------------------------
pull() {
    if [ "$arch" = amd64 ]; then
        timeout "$pull_timeout" docker pull -q "$tag" >/dev/null 2>&1
        return
    fi
    # A platform pull retags debian:bookworm-slim; put the old tag back after.
    local upstream=debian:bookworm-slim old
    old="$(docker image inspect -f '{{.Id}}' "$upstream" 2>/dev/null || true)"
    if timeout "$pull_timeout" docker pull -q --platform "linux/$arch" "$upstream" >/dev/null 2>&1 &&
        [ "$(image_arch "$upstream")" = "$arch" ]; then
        docker tag "$upstream" "$tag"
        if [ -n "$old" ]; then docker tag "$old" "$upstream"; else docker rmi "$upstream" >/dev/null; fi
        return 0
    fi
    return 1
}

if [ -z "$rebuild" ]; then
    start=$SECONDS
    if pull; then
        log "pulled $tag ($(elapsed "$start"))"
        exit 0
    fi
    log "cannot pull $tag (no registry?): building it with debootstrap"
fi

# --- 3. debootstrap + docker load --------------------------------------------
if ! is_root || ! is_debian; then
    die "cannot pull $tag and building it needs root on Debian (debootstrap)" \
        "pull it where a registry is reachable and 'docker save | docker load' it here, or run as root on Debian"
fi
command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
[ -r /usr/share/keyrings/debian-archive-keyring.gpg ] || apt_install debian-archive-keyring
[ "$arch" = "$(host_arch)" ] || qemu_arm64_setup

rootfs="$(mktemp -d "${TMPDIR:-/var/tmp}/agentenv-rootfs-$arch.XXXXXX")"
cleanup() {
    # debootstrap mounts /proc and /sys inside the target; a failed run can
    # leave them mounted. Unmount (deepest first) before deleting anything.
    local m
    while read -r m; do umount -l "$m" 2>/dev/null || true; done < <(
        awk -v d="$rootfs" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/mounts | sort -r
    )
    rm -rf --one-file-system "$rootfs"
}
trap cleanup EXIT

start=$SECONDS
log "debootstrap $suite ($arch, minbase) from $mirror into $rootfs"
if ! timeout "$debootstrap_timeout" debootstrap --variant=minbase --arch="$arch" \
    "$suite" "$rootfs" "$mirror" >"$rootfs.log" 2>&1; then
    tail -n 20 "$rootfs.log" >&2 || true
    tail -n 20 "$rootfs/debootstrap/debootstrap.log" >&2 2>/dev/null || true
    die "debootstrap failed or timed out after ${debootstrap_timeout}s (log above: $rootfs.log)" \
        "check that $mirror is reachable (curl -I $mirror/dists/$suite/InRelease)" \
        "for arm64: scripts/qemu.sh must succeed first"
fi
rm -f "$rootfs.log"
log "debootstrap done ($(elapsed "$start"))"

# Make it look like Debian's official slim image.
rm -f "$rootfs/etc/apt/sources.list"
cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
# As in Debian's official -slim images: no docs, man pages or translations.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
EOF
cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
echo 'APT::AutoRemove::SuggestsImportant "false";' >"$rootfs/etc/apt/apt.conf.d/docker-autoremove-suggests"
find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
rm -rf "$rootfs"/usr/share/{info,man,locale,lintian/overrides}/* \
    "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old \
    "$rootfs"/var/log/* "$rootfs"/tmp/* "$rootfs"/root/.cache
: >"$rootfs/etc/resolv.conf"   # the host's, copied by debootstrap; Docker mounts its own
: >"$rootfs/etc/hostname"
[ -e "$rootfs/etc/machine-id" ] && : >"$rootfs/etc/machine-id"

# `docker import --platform` does not set the image's Architecture on older
# engines (Debian's 20.10 records the host's), and the classic builder takes
# an image's Architecture from its base. So write the image archive (the
# `docker save` format: one layer, a config naming the architecture, a
# manifest) and `docker load` it.
start=$SECONDS
log "loading $tag (linux/$arch)"
archive="$(mktemp -d "${TMPDIR:-/var/tmp}/agentenv-image-$arch.XXXXXX")"
trap 'cleanup; rm -rf "$archive"' EXIT
tar --numeric-owner -C "$rootfs" \
    --exclude='./proc/*' --exclude='./sys/*' --exclude='./dev/*' -cf "$archive/layer.tar" .
diff_id="$(sha256sum "$archive/layer.tar" | cut -d' ' -f1)"
mkdir "$archive/$diff_id"
mv "$archive/layer.tar" "$archive/$diff_id/layer.tar"
created="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
variant=""
[ "$arch" = arm64 ] && variant='"variant":"v8",'
printf '{"architecture":"%s",%s"os":"linux","created":"%s",%s,%s,%s}' \
    "$arch" "$variant" "$created" \
    '"config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Cmd":["bash"]}' \
    "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:$diff_id\"]}" \
    "\"history\":[{\"created\":\"$created\",\"created_by\":\"debootstrap --variant=minbase --arch=$arch $suite $mirror (scripts/base-image.sh)\"}]" \
    >"$archive/config.json"
config_id="$(sha256sum "$archive/config.json" | cut -d' ' -f1)"
mv "$archive/config.json" "$archive/$config_id.json"
printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]\n' \
    "$config_id" "$tag" "$diff_id" >"$archive/manifest.json"
tar -C "$archive" -c . | docker load -q >/dev/null ||
    die "docker load of the built $tag failed" "run: docker load < (the archive) by hand to see why; check free disk space"
got="$(image_arch "$tag")"
[ "$got" = "$arch" ] || die "loaded $tag but its Architecture is '$got', not $arch" \
    "report this: the engine rewrote the image's config ($(docker version -f '{{.Server.Version}}' 2>/dev/null))"
log "built $tag ($arch, $(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}'), load $(elapsed "$start"))"
