#!/usr/bin/env bash
# Installs the browser computer natively on a Debian bookworm machine (a VM, a
# Modal image, a plain container): the same supervisord stack as the image,
# the same users, folders and Chromium policies, started as a system service.
#
#   sudo scripts/install-native.sh [--wheels DIR] [--no-start]
#
#   --wheels DIR   install Python packages from a wheelhouse made by
#                  scripts/wheels.sh (DIR holds *.whl, runtime.lock and
#                  project/agentenv-*.whl): no package index is needed.
#                  Without it, pip installs requirements/runtime.lock from the
#                  index and agentenv from this checkout.
#   --no-start     install only; do not enable or start the service.
#
# Tokens: AGENTENV_CONTROL_TOKEN and AGENTENV_USERS ("name:token,...") are
# taken from the environment the first time (sudo drops the environment: use
# sudo --preserve-env=AGENTENV_CONTROL_TOKEN,AGENTENV_USERS). For a machine
# this script starts, what is not given is made at random (one user,
# "agent"); with --no-start (an image to be copied) nothing is made, and the
# launcher refuses to start until the tokens are given. They are kept in
# /etc/agentenv/control-token (root only) and /etc/agentenv/users (root and
# the agentenv user), never printed; a second run keeps them, and says so if
# it was given others. Other settings (AGENTENV_ALLOWED_HOSTS, ...: see the
# docs/settings.md) go in /etc/agentenv/agentenv.env, KEY=VALUE a line.
#
# With systemd running, the service is agentenv.service (enabled, started or
# restarted after an upgrade, and waited on until /readyz answers). Without
# it (containers, Modal), start the stack with
#   /opt/agentenv/bin/agentenv-computer
# which runs in the foreground until it is stopped (SIGTERM); a non-empty
# AGENTENV_* variable in its environment wins over the files.
set -euo pipefail
# Whatever umask sudo passes on: the venv and the image folder must be
# readable by the users the programs run as.
umask 0022
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

wheels=""
start=1
while [ $# -gt 0 ]; do
    case "$1" in
        --wheels)
            [ $# -ge 2 ] || die "--wheels needs a folder" "give the folder scripts/wheels.sh made, e.g. build/wheels/amd64"
            wheels="$(cd "$2" && pwd)" || die "--wheels $2: no such folder" "run scripts/wheels.sh first"
            shift 2
            ;;
        --no-start) start=""; shift ;;
        -h | --help) sed -n '2,31p' "$0"; exit 0 ;;
        *) die "unknown option '$1'" "usage: scripts/install-native.sh [--wheels DIR] [--no-start]" ;;
    esac
done

is_root || die "the install needs root" "run: sudo $0 $*"
is_debian || die "this is not a Debian machine" "install on Debian bookworm (the image's base), or run the image instead"
if [ -r /etc/os-release ] && ! grep -q '^VERSION_CODENAME=bookworm' /etc/os-release; then
    warn "not Debian bookworm: Chromium's and Python's versions may differ from the image's"
fi

prefix=/opt/agentenv
venv="$prefix/venv"
conf=/etc/agentenv
src="$AGENTENV_ROOT/images/browser"

# 1. The system layer, exactly as the image has it.
log "the system layer (packages, users, folders)"
had_supervisor=""
dpkg-query -W -f '${Status}' supervisor 2>/dev/null | grep -q 'install ok installed' && had_supervisor=1
bash "$src/system.sh"
if [ -z "$had_supervisor" ]; then
    # Debian's supervisor package enables a supervisord of its own (root, an
    # empty conf.d); agentenv.service runs its own. One this install brought
    # is turned off; one the machine had before is left as it was.
    if [ -d /run/systemd/system ]; then
        systemctl disable --now --quiet supervisor.service 2>/dev/null || true
    else  # no systemd running (an image to be copied): what disable removes
        rm -f /etc/systemd/system/multi-user.target.wants/supervisor.service
    fi
    log "Debian's own supervisor.service (installed with the package) is disabled"
fi
install -d -m 0755 /etc/chromium/policies/managed
install -m 0644 "$src/policies/agentenv.json" /etc/chromium/policies/managed/agentenv.json

# 2. Python: a venv of its own, the lock's exact pins, then agentenv.
log "python packages into $venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
if [ -n "$wheels" ]; then
    [ -r "$wheels/runtime.lock" ] && compgen -G "$wheels/project/agentenv-*.whl" >/dev/null ||
        die "$wheels is not a wheelhouse of scripts/wheels.sh" "run scripts/wheels.sh, then give --wheels build/wheels/<arch>"
    "$venv/bin/pip" install --quiet --no-index --find-links "$wheels" -r "$wheels/runtime.lock"
    "$venv/bin/pip" install --quiet --no-index --no-deps --force-reinstall "$wheels"/project/agentenv-*.whl
else
    "$venv/bin/pip" install --quiet -r "$AGENTENV_ROOT/requirements/runtime.lock" ||
        die "pip could not install requirements/runtime.lock" \
            "check the machine reaches the package index, or make a wheelhouse elsewhere (scripts/wheels.sh) and give --wheels"
    "$venv/bin/pip" install --quiet --no-deps --force-reinstall "$AGENTENV_ROOT"
fi
"$venv/bin/pip" check
# As in the image's build: every program loads, and Playwright MCP's runtime starts.
"$venv/bin/python" -c 'from importlib.metadata import entry_points
for e in entry_points(group="console_scripts"):
    if e.value.startswith("agentenv."):
        e.load()'
"$venv/bin/python" -c 'import asyncio, sys
from agentenv.app.runtime import runtime_problem
problem = asyncio.run(runtime_problem())
sys.exit(f"Playwright MCP does not start: {problem}" if problem else 0)'

# 3. supervisord's configuration and the launch scripts, replaced whole (an
#    upgrade leaves no file of the last version behind).
rm -rf "$prefix/image"
install -d -m 0755 "$prefix/image" "$prefix/image/conf.d" "$prefix/image/launch" "$prefix/bin"
install -m 0644 "$src/supervisord.conf" "$prefix/image/"
install -m 0644 "$src"/conf.d/*.conf "$prefix/image/conf.d/"
install -m 0755 "$src"/launch/*.sh "$prefix/image/launch/"
ln -sfn "$prefix/image/launch/native.sh" "$prefix/bin/agentenv-computer"
# The digest of the computer's own files, as the image's build makes it: its
# recordings carry it (image_digest).
"$prefix/image/launch/digest.sh" "$prefix" >/dev/null

# 4. Settings (read literally by the launcher) and tokens, root only.
install -d -m 0750 -g agentenv "$conf"
if [ ! -e "$conf/agentenv.env" ]; then
    log "writing $conf/agentenv.env"
    cat >"$conf/agentenv.env" <<EOF
# The browser computer's settings, KEY=VALUE a line, read literally by
# $prefix/bin/agentenv-computer (see docs/settings.md). The same
# settings as the image's ENV (images/browser/Dockerfile). Tokens are not
# here: $conf/control-token and $conf/users.
AGENTENV_IMAGE_DIR=$prefix/image
AGENTENV_VENV=$venv
AGENTENV_LOG_DIR=/var/log/agentenv
AGENTENV_RUN_DIR=/run/agentenv
AGENTENV_SERVICE_USER=agentenv
AGENTENV_CHROMIUM_USER=browser
AGENTENV_PROFILE_DIR=/home/browser/profile
AGENTENV_DOWNLOADS_DIR=/var/lib/agentenv/downloads
AGENTENV_NAME=browser
PYTHONUNBUFFERED=1
EOF
fi
# The tokens: given ones are checked; random ones are made only for a machine
# this script starts (with --no-start, e.g. an image to be copied, none are
# made, and the launcher refuses to start until they are given).
random_token() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
control="${AGENTENV_CONTROL_TOKEN:-}"
users="${AGENTENV_USERS:-}"
if [ -n "$control" ] && ! [[ "$control" =~ ^[A-Za-z0-9._~+/=-]{16,}$ ]]; then
    die "AGENTENV_CONTROL_TOKEN is not a token" "give 16 or more letters, digits or ._~+/=- (e.g. openssl rand -hex 24)"
fi
if [ -n "$users" ]; then
    printf '%s' "$users" | "$venv/bin/python" -c 'import sys
from agentenv.settings import SettingsError, parse_users
try:
    parse_users(sys.stdin.read())
except SettingsError as exc:
    sys.exit(f"install-native.sh: error: {exc}")'
fi
if [ -s "$conf/control-token" ]; then
    [ -z "$control" ] || warn "kept the control token in $conf/control-token: delete the file to replace it"
elif [ -n "$control" ] || [ -n "$start" ]; then
    log "writing $conf/control-token (root only)"
    (umask 0077 && printf '%s\n' "${control:-$(random_token)}" >"$conf/control-token")
fi
if [ -s "$conf/users" ]; then
    [ -z "$users" ] || warn "kept the users in $conf/users: delete the file to replace them"
elif [ -n "$users" ] || [ -n "$start" ]; then
    log "writing $conf/users (root and the agentenv user only)"
    (
        umask 0077
        printf '# name:token, one a line (AGENTENV_USERS_FILE)\n' >"$conf/users"
        tr ', \t' '\n\n\n' <<<"${users:-agent:$(random_token)}" | sed '/^$/d' >>"$conf/users"
    )
fi
chmod 0644 "$conf/agentenv.env"
if [ -e "$conf/control-token" ]; then chown root:root "$conf/control-token" && chmod 0600 "$conf/control-token"; fi
# The service user reads its users file after supervisord drops to it.
if [ -e "$conf/users" ]; then chown root:agentenv "$conf/users" && chmod 0640 "$conf/users"; fi

# 5. The system service (images/browser/agentenv.service).
if [ -d /etc/systemd/system ]; then
    install -m 0644 "$src/agentenv.service" /etc/systemd/system/agentenv.service
else
    warn "no /etc/systemd/system: no service written"
fi

# 6. Start it (again, after an upgrade) and wait until it is ready.
if [ -n "$start" ] && [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    systemctl enable agentenv.service
    systemctl restart agentenv.service
    log "started agentenv.service; waiting for http://127.0.0.1:8080/readyz"
    for _ in $(seq 1 240); do
        if curl -fs -m 2 -o /dev/null http://127.0.0.1:8080/readyz; then
            log "ready: the relay on :9222, the app server on :8080"
            break
        fi
        sleep 0.5
    done
    curl -fsS -m 2 -o /dev/null http://127.0.0.1:8080/readyz ||
        die "agentenv.service is not ready after 120 s" "read journalctl -u agentenv and /var/log/agentenv/supervisord.log"
elif [ -n "$start" ]; then
    log "no systemd here: start the computer with $prefix/bin/agentenv-computer (foreground)"
fi
log "installed; tokens are in $conf/control-token and $conf/users (root only)"
