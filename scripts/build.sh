#!/usr/bin/env bash
# Builds the browser computer image.
#
#   scripts/build.sh [amd64|arm64|all]        (default: amd64)
#
# Tags: amd64 -> $IMAGE        (default agentenv/browser:latest)
#       arm64 -> $IMAGE_ARM64  (default $IMAGE with "-arm64" appended to its
#                               tag: agentenv/browser:latest-arm64)
#
# Each architecture: scripts/engine.sh (once), scripts/base-image.sh ARCH,
# scripts/wheels.sh ARCH, then the classic builder
# (DOCKER_BUILDKIT=0 docker build) from images/browser/Dockerfile with the
# repository root as context. arm64 on an amd64 host builds from the arm64
# base under qemu (scripts/qemu.sh); it is slow (see the timings printed).
#
# AGENTENV_BUILDER=auto|classic|buildx (default auto: buildx when
# `docker buildx` exists, e.g. Docker Desktop, else classic). buildx builds
# with --platform linux/ARCH --load from debian:bookworm-slim pulled from a
# registry, and skips scripts/base-image.sh.
# AGENTENV_BUILD_QUIET=1 hides the builder's step output.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=scripts/qemu.sh
. "$(dirname "${BASH_SOURCE[0]}")/qemu.sh"

target=amd64
for arg in "$@"; do
    case "$arg" in
        all) target=all ;;
        -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
        -*) die "unknown option '$arg'" "usage: scripts/build.sh [amd64|arm64|all]" ;;
        *) target="$(normalize_arch "$arg")" ;;
    esac
done

cd "$AGENTENV_ROOT"
scripts="$AGENTENV_ROOT/scripts"

image="${IMAGE:-agentenv/browser:latest}"
# A reference without a tag (no ":" after the last "/") means :latest.
case "${image##*/}" in *:*) ;; *) image="$image:latest" ;; esac
image_arm64="${IMAGE_ARM64:-$image-arm64}"

version="$(sed -n 's/^version[[:space:]]*=[[:space:]]*"\(.*\)"/\1/p' pyproject.toml | head -n1)"
[ -n "$version" ] || die "cannot read the version from pyproject.toml" "check its [project] version = \"...\" line"

"$scripts/engine.sh"

builder="${AGENTENV_BUILDER:-auto}"
if [ "$builder" = auto ]; then
    if docker buildx version >/dev/null 2>&1; then builder=buildx; else builder=classic; fi
fi
case "$builder" in classic | buildx) ;; *) die "AGENTENV_BUILDER=$builder" "use auto, classic or buildx" ;; esac

quiet=()
[ -n "${AGENTENV_BUILD_QUIET:-}" ] && quiet=(-q)

build_one() {
    local arch="$1" tag base t0 t
    t0=$SECONDS
    if [ "$arch" = amd64 ]; then tag="$image"; else tag="$image_arm64"; fi
    base="$(base_image_tag "$arch")"

    t=$SECONDS
    if [ "$builder" = classic ]; then
        # buildx (Docker Desktop) brings its own emulation; the classic
        # builder runs the arm64 RUN steps through the host's binfmt qemu.
        if [ "$arch" != "$(host_arch)" ]; then qemu_arm64_setup; fi
        "$scripts/base-image.sh" "$arch"
    fi
    "$scripts/wheels.sh" "$arch"
    log "$arch: base image and wheels ready ($(elapsed "$t"))"

    t=$SECONDS
    log "$arch: building $tag with the $builder builder"
    local args=(-f images/browser/Dockerfile -t "$tag"
        --build-arg "WHEELS=build/wheels/$arch" --build-arg "VERSION=$version")
    if [ "$builder" = classic ]; then
        DOCKER_BUILDKIT=0 docker build ${quiet[@]+"${quiet[@]}"} "${args[@]}" --build-arg "BASE=$base" . ||
            die "docker build of $tag failed (output above)" \
                "fix the failing step; if apt-get failed, check that deb.debian.org is reachable from containers"
    else
        docker buildx build ${quiet[@]+"${quiet[@]}"} --platform "linux/$arch" --load "${args[@]}" . ||
            die "docker buildx build of $tag failed (output above)" \
                "without a registry, try AGENTENV_BUILDER=classic"
    fi
    log "$arch: image built ($(elapsed "$t"))"

    # The classic builder has no --platform: the image takes its Architecture
    # from the base image's config, which scripts/base-image.sh sets. Check it.
    local got
    got="$(image_arch "$tag")"
    [ "$got" = "$arch" ] || die "$tag was built but its Architecture is '$got', not $arch" \
        "rebuild the base image: scripts/base-image.sh $arch --rebuild; then re-run scripts/build.sh $arch"

    log "$arch: $tag ready: $(docker image inspect -f '{{.Os}}/{{.Architecture}}, {{.Size}} bytes' "$tag") (total $(elapsed "$t0"))"
}

archs=("$target")
[ "$target" = all ] && archs=(amd64 arm64)
for arch in "${archs[@]}"; do
    build_one "$arch"
done
