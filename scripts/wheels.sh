#!/usr/bin/env bash
# Builds the image's wheelhouse on the host (pip cannot reach the package
# index from inside a docker build on some machines, and a wheelhouse makes
# the build reproducible and offline anyway).
#
#   scripts/wheels.sh [amd64|arm64|all]        (default: amd64)
#
# Result, per architecture, in build/wheels/<arch>/:
#   *.whl           every pin of requirements/runtime.lock, as CPython 3.11
#                   manylinux wheels for linux/<arch> (Debian bookworm's python3)
#   runtime.lock    a copy of the lock: the image installs with it as constraints
#   project/        the agentenv wheel itself (rebuilt on every run)
#
# Downloads are skipped when the wheelhouse already matches the lock (a stamp
# holds the lock's hash and the download flags). Python: $PYTHON, else
# .venv/bin/python, else python3.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

target=amd64
for arg in "$@"; do
    case "$arg" in
        all) target=all ;;
        -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
        -*) die "unknown option '$arg'" "usage: scripts/wheels.sh [amd64|arm64|all]" ;;
        *) target="$(normalize_arch "$arg")" ;;
    esac
done

if [ -n "${PYTHON:-}" ]; then
    py="$PYTHON"
    case "$py" in */*) [ "${py#/}" != "$py" ] || py="$PWD/$py" ;; esac # absolute: we cd below
elif [ -x "$AGENTENV_ROOT/.venv/bin/python" ]; then
    py="$AGENTENV_ROOT/.venv/bin/python"
else
    py=python3
fi

cd "$AGENTENV_ROOT"
lock=requirements/runtime.lock
[ -r "$lock" ] || die "$lock is missing" "restore it (git checkout $lock)"
[ -r pyproject.toml ] || die "pyproject.toml is missing" "run this from a full checkout of the project"

"$py" -m pip --version >/dev/null 2>&1 ||
    die "'$py -m pip' does not run" "create the venv (python3 -m venv .venv) or set PYTHON=/path/to/python with pip"

py_version=3.11 # the image's python3 (Debian bookworm)

# set_platform_flags ARCH: pip's target-platform options for ARCH, into the
# array "flags" (no mapfile: macOS still ships bash 3.2).
set_platform_flags() {
    local m
    case "$1" in amd64) m=x86_64 ;; arm64) m=aarch64 ;; esac
    flags=(--only-binary=:all:
        --platform "manylinux_2_28_$m" --platform "manylinux_2_17_$m" --platform "manylinux2014_$m"
        --python-version "$py_version" --implementation cp)
}

# sha256 < FILE: the hex digest (sha256sum on Linux, shasum on macOS).
sha256() {
    if command -v sha256sum >/dev/null 2>&1; then sha256sum; else shasum -a 256; fi | cut -d' ' -f1
}

# pip_isolated ARGS...: pip without this machine's pip configuration (extra
# find-links or indexes), to check the wheelhouse is complete on its own.
pip_isolated() {
    local unset_args=() v
    for v in $(env | sed -n 's/^\(PIP_[A-Za-z0-9_]*\)=.*/\1/p'); do unset_args+=(-u "$v"); done
    env ${unset_args[@]+"${unset_args[@]}"} PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 "$py" -m pip "$@"
}

# complete DIR: every name==version pin of the lock has a wheel in DIR.
complete() {
    local name version
    while IFS='=' read -r name version; do
        name="$(printf '%s' "$name" | tr '[:upper:]' '[:lower:]' | sed 's/[-_.]\{1,\}/_/g')"
        version="${version#=}"
        compgen -G "$1/${name}-${version}-*.whl" >/dev/null ||
            compgen -G "$1/${name}-${version}-*.WHL" >/dev/null || return 1
    done < <(sed -e 's/[[:space:]]*#.*//' -e 's/[[:space:]]//g' -e 's/;.*//' "$lock" | grep '==')
}

# download ARCH: the lock's wheels into build/wheels/ARCH, unless the stamp says
# they are already there.
download() {
    local arch="$1" dir="build/wheels/$1" stamp want flags
    set_platform_flags "$arch"
    stamp="$dir/.stamp"
    want="$( { sha256 <"$lock"; echo "${flags[*]}"; } | sha256)"
    if [ -r "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && cmp -s "$lock" "$dir/runtime.lock" &&
        complete "$dir"; then
        log "$dir matches $lock: no download"
        return
    fi
    local start=$SECONDS
    log "downloading the wheels of $lock for linux/$arch into $dir"
    rm -rf "$dir"
    mkdir -p "$dir"
    # --no-deps: the lock is complete (every transitive pin); check() below
    # fails if it is not.
    # (grep: hide pip's notes about configured find-links folders that do not exist)
    if ! "$py" -m pip download --quiet --no-deps --dest "$dir" "${flags[@]}" -r "$lock" \
        2> >(grep -v "^WARNING: Location 'file:.* is ignored: it is neither a file nor a directory" >&2); then
        rm -rf "$dir"
        die "pip download for linux/$arch failed" \
            "check that the package index is reachable ($py -m pip download aiohttp) and that every pin in $lock has a cp311 manylinux wheel for $arch"
    fi
    cp "$lock" "$dir/runtime.lock"
    echo "$want" >"$stamp"
    log "downloaded $(find "$dir" -maxdepth 1 -name '*.whl' | wc -l) wheels for $arch ($(elapsed "$start"))"
}

# can_build_offline: the interpreter has what pyproject's build backend needs.
can_build_offline() {
    "$py" - <<'EOF' 2>/dev/null
import importlib.metadata as m, sys
v = tuple(int(x) for x in m.version("setuptools").split(".")[:2])
if v >= (70, 1):  # bdist_wheel is built in
    sys.exit(0)
m.version("wheel")
sys.exit(0 if v >= (68, 0) else 1)
EOF
}

# build_project DIR: the agentenv wheel into DIR/project, from a clean copy of
# the sources (an in-tree build reuses build/lib, which keeps deleted modules).
build_project() {
    local dir="$1/project" tmp isolation=(--no-build-isolation) files=() f
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/agentenv-wheel.XXXXXX")"
    temps+=("$tmp" "$tmp.log")
    for f in pyproject.toml setup.cfg setup.py MANIFEST.in README.md LICENSE services; do
        [ -e "$f" ] && files+=("$f")
    done
    tar -C "$AGENTENV_ROOT" --exclude=__pycache__ --exclude='*.egg-info' --exclude='*.pyc' \
        -cf - "${files[@]}" | tar -C "$tmp" -xf -
    if ! can_build_offline; then
        log "$py lacks setuptools>=70.1 (or >=68 with wheel): building with pip's build isolation (needs the package index)"
        isolation=()
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    # SOURCE_DATE_EPOCH: the same sources give the same wheel bytes, so the
    # image build reuses its cached layers when nothing changed.
    if ! (cd "$tmp" && SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-315532800}" \
        "$py" -m pip wheel --quiet --no-deps ${isolation[@]+"${isolation[@]}"} -w "$AGENTENV_ROOT/$dir" .) \
        >"$tmp.log" 2>&1; then
        tail -n 30 "$tmp.log" >&2
        rm -f "$tmp.log"
        die "building the agentenv wheel failed (output above)" \
            "fix the error, or install build tools: $py -m pip install 'setuptools>=70.1'"
    fi
    rm -f "$tmp.log"
}

# check ARCH: the wheelhouse alone installs agentenv for linux/ARCH with the lock's pins.
check() {
    local arch="$1" dir="build/wheels/$1" flags out tmp
    set_platform_flags "$arch"
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/agentenv-check.XXXXXX")"
    temps+=("$tmp")
    if ! out="$(pip_isolated install --dry-run --ignore-installed --no-index \
        --find-links "$dir" --find-links "$dir/project" "${flags[@]}" --target "$tmp" \
        -c "$dir/runtime.lock" "agentenv[computer]" 2>&1)"; then
        rm -rf "$tmp"
        printf '%s\n' "$out" | tail -n 20 >&2
        die "the wheelhouse $dir cannot install agentenv for linux/$arch (output above)" \
            "if a dependency is missing, add its exact pin to $lock, then re-run scripts/wheels.sh $arch"
    fi
    rm -rf "$tmp"
}

# Temporary folders, removed however this script ends.
temps=()
trap 'rm -rf ${temps[@]+"${temps[@]}"}' EXIT

archs=("$target")
[ "$target" = all ] && archs=(amd64 arm64)
for arch in "${archs[@]}"; do
    download "$arch"
    build_project "build/wheels/$arch"
    check "$arch"
    log "build/wheels/$arch ready ($(basename "$(ls "build/wheels/$arch/project/"*.whl)"))"
done
