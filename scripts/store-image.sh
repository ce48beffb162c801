#!/usr/bin/env bash
# Builds the run store's image: moto's S3 server with its checks on
# (images/store/Dockerfile), which `agentenv run` starts as a run's default
# store. `make image` runs this after the browser image.
#
#   scripts/store-image.sh [--rebuild]
#
# Tag: $AGENTENV_STORE_IMAGE (default agentenv/store:latest), for this
# machine's architecture. The container tests also run plain moto from it.
#
# Idempotent: the image carries a label with the hash of its inputs (the
# Dockerfile, requirements/store.lock, storeserver.py, the wheel platform and
# the base image's id); when an image with that label exists, nothing is
# done. --rebuild builds anyway.
#
# Steps: scripts/engine.sh, scripts/base-image.sh ARCH, the wheelhouse of
# requirements/store.lock downloaded on the host into build/store/wheels/
# (pip cannot reach the index inside a build here; skipped when its stamp
# matches the lock), then the classic builder with build/store/ as the
# context (the repository is never sent). Python: $PYTHON, else
# .venv/bin/python, else python3.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rebuild=""
for arg in "$@"; do
    case "$arg" in
        --rebuild) rebuild=1 ;;
        -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
        *) die "unknown argument '$arg'" "usage: scripts/store-image.sh [--rebuild]" ;;
    esac
done

cd "$AGENTENV_ROOT"
scripts="$AGENTENV_ROOT/scripts"
tag="${AGENTENV_STORE_IMAGE:-agentenv/store:latest}"
case "${tag##*/}" in *:*) ;; *) tag="$tag:latest" ;; esac
lock=requirements/store.lock
dockerfile=images/store/Dockerfile
server=services/agentenv/harness/storeserver.py
context=build/store
wheels="$context/wheels"
[ -r "$lock" ] || die "$lock is missing" "restore it (git checkout $lock)"
[ -r "$dockerfile" ] || die "$dockerfile is missing" "restore it (git checkout $dockerfile)"
[ -r "$server" ] || die "$server is missing" "restore it (git checkout $server)"

if [ -n "${PYTHON:-}" ]; then
    py="$PYTHON"
elif [ -x "$AGENTENV_ROOT/.venv/bin/python" ]; then
    py="$AGENTENV_ROOT/.venv/bin/python"
else
    py=python3
fi

sha256() {
    if command -v sha256sum >/dev/null 2>&1; then sha256sum; else shasum -a 256; fi | cut -d' ' -f1
}

arch="$(host_arch)"
case "$arch" in amd64) m=x86_64 ;; arm64) m=aarch64 ;; esac
flags=(--only-binary=:all:
    --platform "manylinux_2_28_$m" --platform "manylinux_2_17_$m" --platform "manylinux2014_$m"
    --python-version 3.11 --implementation cp)

"$scripts/engine.sh"
"$scripts/base-image.sh" "$arch"
base="$(base_image_tag "$arch")"
base_id="$(docker image inspect -f '{{.Id}}' "$base" 2>/dev/null)" ||
    die "the base image $base is missing" "run scripts/base-image.sh $arch and read its error"

inputs="$( { sha256 <"$dockerfile"; sha256 <"$lock"; sha256 <"$server"; echo "${flags[*]}"; echo "$base_id"; } | sha256)"
label=io.agentenv.inputs
if [ -z "$rebuild" ]; then
    have="$(docker image inspect -f "{{index .Config.Labels \"$label\"}}" "$tag" 2>/dev/null || true)"
    if [ "$have" = "$inputs" ]; then
        log "$tag is up to date: no build"
        exit 0
    fi
fi

# The wheelhouse, unless its stamp says it matches the lock and platform.
want="$( { sha256 <"$lock"; echo "${flags[*]}"; } | sha256)"
if [ -r "$wheels/.stamp" ] && [ "$(cat "$wheels/.stamp")" = "$want" ] && cmp -s "$lock" "$wheels/store.lock"; then
    log "$wheels matches $lock: no download"
else
    start=$SECONDS
    log "downloading the wheels of $lock for linux/$arch into $wheels"
    rm -rf "$wheels"
    mkdir -p "$wheels"
    # --no-deps: the lock pins every transitive package; the build's
    # `pip install --no-index` and `pip check` fail if one is missing.
    if ! "$py" -m pip download --quiet --no-deps --dest "$wheels" "${flags[@]}" -r "$lock" \
        2> >(grep -v "^WARNING: Location 'file:.* is ignored: it is neither a file nor a directory" >&2); then
        rm -rf "$wheels"
        die "pip download of $lock for linux/$arch failed" \
            "check that the package index is reachable ($py -m pip download moto) and that every pin in $lock has a cp311 wheel for $arch"
    fi
    cp "$lock" "$wheels/store.lock"
    echo "$want" >"$wheels/.stamp"
    log "downloaded $(find "$wheels" -maxdepth 1 -name '*.whl' | wc -l) wheels ($(elapsed "$start"))"
fi

cp "$server" "$context/storeserver.py"
start=$SECONDS
log "building $tag (linux/$arch) from $dockerfile, context $context"
quiet=()
[ -n "${AGENTENV_BUILD_QUIET:-}" ] && quiet=(-q)
DOCKER_BUILDKIT=0 docker build ${quiet[@]+"${quiet[@]}"} -f "$dockerfile" -t "$tag" \
    --build-arg "BASE=$base" --label "$label=$inputs" "$context" ||
    die "docker build of $tag failed (output above)" \
        "fix the failing step; if apt-get failed, check that deb.debian.org is reachable from containers"
log "$tag built ($(elapsed "$start"))"
