"""Which names hold a secret (docs/spec.md section 1, "Secrets"): a URL query
key or a body's field (:func:`credential_key`), a key of a command's params
or a tool's arguments (:func:`secret_field`), and a header, by its name or its
value (:func:`secret_header`, :func:`secret_header_value`). One table for the
log, the network log's bodies and the HAR (:mod:`agentenv.log.redact`,
:mod:`agentenv.log.bodies`, :mod:`agentenv.recorder.har`). No I/O.
"""

from __future__ import annotations

import functools
import re
from urllib.parse import unquote

__all__ = ["credential_key", "secret_field", "secret_header", "secret_header_value"]

_CREDENTIAL_KEYS = frozenset(
    k.lower()
    for k in [
        "token",
        "access_token",
        "id_token",
        "refresh_token",
        "key",
        "api_key",
        "apikey",
        "code",
        "code_verifier",
        "client_secret",
        "password",
        "passwd",
        "pwd",
        "secret",
        "session",
        "sessionid",
        "sid",
        "sig",
        "signature",
        "auth",
        "authorization",
        "credential",
        "state",
        "SAMLRequest",
        "SAMLResponse",
        "pass",
        "passphrase",
        "passcode",
        "otp",
        "jwt",
        "ticket",
        "jsessionid",
        "phpsessid",
        "sessid",
        "auth_code",
        "authorization_code",
        "device_code",
        "private_key",
        "access_key",
        "secret_key",
        "pin",
        "pw",
        "totp",
        "mfa_code",
        "otp_code",
        "verification_code",
        "x_auth",
        # OAuth's client credentials and token exchange (RFC 7521, 8693).
        "credentials",
        "client_assertion",
        "assertion",
        # Cards and one-time codes.
        "cvc",
        "cvv",
        "cvn",
        "csc",
        "card_number",
        "card_num",
        "card_no",
        "cc_number",
        "ccnum",
        "credit_card",
        "security_code",
        "one_time_code",
        "mfa",
        "ssn",
    ]
)
#: The keys above, and the key read, with case, "-" and "_" set aside:
#: accessToken, access-token and ACCESS_TOKEN are one key.
_CREDENTIAL_COMPACT = frozenset(k.replace("_", "") for k in _CREDENTIAL_KEYS)
#: Words that make any key holding them a credential's (pin_code, otp_sent,
#: cvc_check, card_number_confirm).
_STRONG_PARTS = frozenset(
    {"password", "passwd", "passphrase", "pwd", "secret", "pin", "otp", "totp", "cvc", "cvv"}
)
_CREDENTIAL_PREFIXES = ("x_amz_", "x_goog_")
_CREDENTIAL_SUFFIXES = ("_token", "_secret", "_key")
#: Endings of a compacted key that name a credential whatever comes before
#: (clientSecret, authToken, oauth_verifier, newPassword, PHPSESSID).
_CREDENTIAL_ENDINGS = (
    "token",
    "secret",
    "password",
    "passwd",
    "verifier",
    "sessid",
    "sessionid",
    "signature",
    "authorization",
    "assertion",
    "cardnumber",
)
#: A lower-case letter or digit before a capital: a camelCase word's start.
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
#: What splits a bracketed or dotted key: user[password], data.token, token[].
_KEY_PARTS = re.compile(r"[\[\].]+")

#: Words of the protocols the log records (CDP's params, MCP tools' and ops'
#: arguments) that :func:`credential_key` takes for a credential's but that
#: hold none there: a keyboard's ``key`` and ``code``, a script's ``code``,
#: a session's id, a storage or cookie partition's key, a state. Compacted
#: (lower case, no "_" or "-"). In what a page sends they are credentials
#: (an OAuth ``code``, an API ``key``): the bodies' rules have no such words.
_COMMAND_WORDS = frozenset(
    {
        "key",
        "code",
        "state",
        "session",
        "sessionid",
        "sessionkey",
        "partitionkey",
        "cookiepartitionkey",
        "storagekey",
        "primarykey",
        "issystemkey",
        "keys",
    }
)
#: Keys of commands' arguments that hold a secret though no credential names
#: them: what a prompt() is answered with (MCP's browser_handle_dialog too).
_COMMAND_SECRETS = frozenset({"prompttext"})

_SECRET_HEADERS = frozenset({"authorization", "cookie", "set-cookie", "proxy-authorization"})
# A header named like a secret: a secret's word anywhere in the name
# (X-Api-Key, Private-Token, Authentication, X-Session-Id, X-Hub-Signature-256,
# X-Csrf-Token, Cookie2, X-Secret-Value, X-Password-Hash, X-Passcode), or a
# short one as a word of its own (X-Access-Key-Id, X-Api-Keyid, X-Pass,
# X-Pwd, X-Otp, Sid, X-Sig, X-GitHub-PAT, X-MFA).
_SECRET_HEADER_NAME = re.compile(
    r"token|secret|passw|passcode|passphrase|signature|cookie|csrf|xsrf|credential|auth"
    r"|session|apikey|jwt|totp"
    r"|(?:^|[-_\s])(?:[a-z]*keys?(?:id)?|sig|pass|pwd|pw|pin|otp|mfa|pat|sid)(?:$|[-_\s\d])",
    re.IGNORECASE,
)
#: A header value that is a credential whatever the header's name: an
#: authorization scheme and its credentials (Bearer, Basic, GitHub's "token",
#: AWS signatures, Okta's SSWS).
_SECRET_VALUE = re.compile(
    r"\s*(?:bearer|basic|digest|negotiate|ntlm|token|oauth|aws|ssws|aws4-hmac-sha\d+)\s",
    re.IGNORECASE,
)


@functools.lru_cache(maxsize=4096)
def credential_key(name: str) -> bool:
    """Whether a URL query key carries a credential: in any case, camelCase,
    with "-" or "_", percent-encoded, or as a part of a bracketed or dotted
    key (``user[password]``)."""
    if "%" in name:
        name = unquote(name)
    if "[" in name or "]" in name or "." in name:
        return any(credential_key(part) for part in _KEY_PARTS.split(name) if part)
    n = _CAMEL.sub(r"\1_\2", name).lower().replace("-", "_")
    # Numbered: password1, token_2, pass2.
    n = n.rstrip("0123456789_") or n
    compact = n.replace("_", "")
    return (
        compact in _CREDENTIAL_COMPACT
        # Plural: tokens, credentials, keys, codes.
        or (compact.endswith("s") and compact[:-1] in _CREDENTIAL_COMPACT)
        or n.startswith(_CREDENTIAL_PREFIXES)
        or n.endswith(_CREDENTIAL_SUFFIXES)
        # A secret word as any part: password_confirm, passwordConfirm.
        or not _STRONG_PARTS.isdisjoint(n.split("_"))
        or compact.endswith(_CREDENTIAL_ENDINGS)
    )


@functools.lru_cache(maxsize=4096)
def secret_field(name: str) -> bool:
    """Whether a key of a command's params or arguments names a secret:
    :func:`credential_key`, less the protocols' own words (``key``,
    ``code``, ``sessionId``: :data:`_COMMAND_WORDS`)."""
    compact = name.lower().replace("_", "").replace("-", "")
    if compact in _COMMAND_SECRETS:
        return True
    return compact not in _COMMAND_WORDS and credential_key(name)


def secret_header(name: str) -> bool:
    """Whether a header's value must be withheld (whitespace around the name
    is no disguise)."""
    name = name.strip()
    return name.lower() in _SECRET_HEADERS or bool(_SECRET_HEADER_NAME.search(name))


def secret_header_value(value: object) -> bool:
    """Whether a header's value is a credential whatever its name
    (``Bearer …``, ``Basic …``, an AWS signature)."""
    return isinstance(value, str) and _SECRET_VALUE.match(value[:64]) is not None
