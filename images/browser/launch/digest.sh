#!/usr/bin/env bash
# Writes PREFIX/image.digest, "sha256:<hex>": the digest of the computer's own
# files, which its recordings carry (start.json's and the manifest's
# image_digest). It covers every file under PREFIX (the venv with agentenv
# and each Python package, supervisord's configuration, the launch scripts)
# and Chromium's managed policies: each file's SHA-256 and path, sorted by
# path, hashed again. Run once when the image is built (Dockerfile) or the
# machine installed (scripts/install-native.sh); Debian's packages are named
# by Chromium's version beside it. Usage: digest.sh PREFIX
set -euo pipefail
prefix="${1:?usage: digest.sh PREFIX (such as /opt/agentenv)}"
out="$prefix/image.digest"
sum="$(
    {
        find "$prefix" -xdev -type f ! -path "$out" ! -path "$out.part" -print0
        if [ -d /etc/chromium/policies/managed ]; then
            find /etc/chromium/policies/managed -type f -print0
        fi
    } | LC_ALL=C sort -z | xargs -0 -r sha256sum | sha256sum
)"
printf 'sha256:%s\n' "${sum%% *}" >"$out.part"
chmod 0644 "$out.part"
mv -f "$out.part" "$out"
cat "$out"
