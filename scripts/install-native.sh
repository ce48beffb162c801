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
# taken from the environment the first time; what is not given is made at
# random (one user, "agent"). They are kept, root-only, in
# /etc/agentenv/agentenv.env and /etc/agentenv/users, never printed; a second
# run keeps them. Other settings (AGENTENV_ALLOWED_HOSTS, ...: see the README's
# settings) go in /etc/agentenv/agentenv.env too.
#
# With systemd running, the service is agentenv.service (enabled and started).
# Without it (containers, Modal), start the stack with
#   /opt/agentenv/bin/agentenv-computer
# which runs in the foreground until it is stopped (SIGTERM).
set -euo pipefail
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
        -h | --help) sed -n '2,26p' "$0"; exit 0 ;;
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
bash "$src/system.sh"
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

# 3. supervisord's configuration and the launch scripts.
install -d -m 0755 "$prefix/image" "$prefix/image/conf.d" "$prefix/image/launch" "$prefix/bin"
install -m 0644 "$src/supervisord.conf" "$prefix/image/"
install -m 0644 "$src"/conf.d/*.conf "$prefix/image/conf.d/"
install -m 0755 "$src"/launch/*.sh "$prefix/image/launch/"

# 4. Settings and tokens, root only; kept when they exist.
install -d -m 0700 "$conf"
if [ ! -e "$conf/users" ]; then
    log "writing $conf/users (root only)"
    (
        umask 0077
        users="${AGENTENV_USERS:-agent:$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}"
        printf '# name:token, one a line (AGENTENV_USERS_FILE)\n' >"$conf/users"
        tr ', ' '\n\n' <<<"$users" | sed '/^$/d' >>"$conf/users"
    )
fi
if [ ! -e "$conf/agentenv.env" ]; then
    log "writing $conf/agentenv.env (root only)"
    (
        umask 0077
        control="${AGENTENV_CONTROL_TOKEN:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}"
        # The same settings as the image's ENV (images/browser/Dockerfile).
        cat >"$conf/agentenv.env" <<EOF
# The browser computer's settings (systemd EnvironmentFile and
# /opt/agentenv/bin/agentenv-computer). See the README's settings table.
AGENTENV_IMAGE_DIR=$prefix/image
AGENTENV_VENV=$venv
AGENTENV_LOG_DIR=/var/log/agentenv
AGENTENV_RUN_DIR=/run/agentenv
AGENTENV_SERVICE_USER=agentenv
AGENTENV_CHROMIUM_USER=browser
AGENTENV_PROFILE_DIR=/home/browser/profile
AGENTENV_DOWNLOADS_DIR=/var/lib/agentenv/downloads
AGENTENV_NAME=browser
AGENTENV_USERS_FILE=$conf/users
AGENTENV_CONTROL_TOKEN=$control
PYTHONUNBUFFERED=1
EOF
    )
fi
# The service user reads its users file after supervisord drops to it.
chgrp agentenv "$conf" "$conf/users"
chmod 0750 "$conf"
chmod 0640 "$conf/users"
chmod 0600 "$conf/agentenv.env"

# 5. The launcher (tini reaps what Chromium leaves, whatever started it) and
#    the system service.
cat >"$prefix/bin/agentenv-computer" <<EOF
#!/usr/bin/env bash
# Starts the browser computer in the foreground (scripts/install-native.sh).
# Settings come from $conf/agentenv.env; an AGENTENV_* variable already in the
# environment wins (a Modal secret, a container's env), and AGENTENV_USERS given
# so replaces the users file: tokens baked into a machine image are not used.
set -euo pipefail
[ "\$(id -u)" = 0 ] || { echo "agentenv-computer: run it as root (it starts each program as its own user)" >&2; exit 1; }
given="\$(export -p | grep -E '^declare -x AGENTENV_[A-Z0-9_]+=' || true)"
set -a
. $conf/agentenv.env
set +a
eval "\$given"
if grep -q '^declare -x AGENTENV_USERS=' <<<"\$given" && ! grep -q '^declare -x AGENTENV_USERS_FILE=' <<<"\$given"; then
    unset AGENTENV_USERS_FILE
fi
export PATH="$venv/bin:/usr/sbin:/usr/bin:/sbin:/bin"
exec /usr/bin/tini -s -- $prefix/image/launch/supervisord.sh
EOF
chmod 0755 "$prefix/bin/agentenv-computer"

cat >/etc/systemd/system/agentenv.service 2>/dev/null <<EOF || warn "no /etc/systemd/system: no service written"
[Unit]
Description=agentenv browser computer (Chromium behind a CDP relay that records every action)
After=network-online.target
Wants=network-online.target

[Service]
ExecStart=$prefix/bin/agentenv-computer
Restart=on-failure
RestartSec=2
# supervisord stops the recorder first and waits for open recordings to upload.
TimeoutStopSec=90
KillMode=mixed
# As in the image: root only to start each program as its own user.
CapabilityBoundingSet=CAP_SETUID CAP_SETGID CAP_KILL
NoNewPrivileges=yes
ProtectSystem=full
PrivateTmp=yes

[Install]
WantedBy=multi-user.target
EOF

# 6. Start it.
if [ -n "$start" ] && [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    systemctl enable --now agentenv.service
    log "started agentenv.service: the relay on :9222, the app server on :8080"
elif [ -n "$start" ]; then
    log "no systemd here: start the computer with $prefix/bin/agentenv-computer (foreground)"
fi
log "installed; tokens are in $conf/agentenv.env and $conf/users (root only)"
