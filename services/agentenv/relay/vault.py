"""The credential vault: named credentials per scope, held in the relay's
memory only, and the rule that decides whether a fill may type one
(docs/spec.md section 3, "Credentials"; issue 45). No I/O.

**Why the relay holds them.** The relay is the process that types a value
(``Input.insertText`` on a session of its own on the agent's tab, see
:mod:`agentenv.relay.filling`), and the one that can check, in its isolated
world, which frame holds the focus. Held anywhere else (the app server),
every fill would carry the value over one more hop, and the app would have
to ask the relay for the focus's origin and then send the text: two
processes holding the secret instead of one, and a gap between the check
and the typing that another process's command could fall in. So the app
hands a credential to the relay once (``AgentEnv.setCredential``, its
control link, loopback) and forgets it; the relay never writes it: not to
disk, the action log, its process log, an error, a manifest or ``/metrics``.
A relay restart forgets every credential (the harness sets them again).

**The rule** (:func:`refusal`): a value is typed only into the focused
element of the tab, and only when the document holding that element (the
focus followed through open shadow roots and same-origin frames, exactly as
the password check follows it: :data:`agentenv.relay.password.FOCUS_OF`) is
of the credential's origin, compared exactly (scheme, host, port; the
document's ``location.origin`` read in the relay's isolated world, where no
page script can change what it says). A focused frame the relay's world
cannot look into (another origin, a sandboxed one) is refused, whatever the
page around it is. The element must be editable: a text-like ``input``, a
``textarea``, or an editable element, none of them disabled or read-only.

**Reading a password back** (:meth:`Vault.scrub`): once a credential's
password was filled in a scope, the relay replaces its text, as JSON writes
it, in every message Chromium sends that scope's agents' connections (an
answer to ``Runtime.evaluate`` of the field's ``value``, a DOM read, a
console event) with :data:`WITHHELD_TEXT`, until the credential is cleared
or the scope closes. It is a byte match: a script that transforms the value
first (``btoa``, reversing it) gets it out, and the username and TOTP codes
are not matched (a page shows its user's name; a code is six digits).

**What stays possible** (docs/limits.md): the value is the page's once
typed, and the agent drives the page: a transformed read, as above, or a
field of its own script's making on a page of the right origin, focused and
filled. The relay keeps the value out of every op's answer, the log and the
recording, and off every other origin.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import SecretStr

from agentenv.protocol.credentials import (
    MAX_CREDENTIALS,
    CredentialField,
    CredentialInfo,
)
from agentenv.relay.password import FOCUS_OF, evaluated_value
from agentenv.relay.relay_errors import RelayError
from agentenv.totp import code, secret_bytes

__all__ = [
    "FILL_EXPRESSION",
    "HOME",
    "WITHHELD_TEXT",
    "Credential",
    "FillRefused",
    "Vault",
    "refusal",
]

#: The vault's key for a computer with no scopes (or one): every link's.
HOME = ""

#: What an agent reads in place of a filled password (JSON-safe: no quote,
#: no backslash).
WITHHELD_TEXT = "(withheld by agentenv: a credential's password)"


def _spellings(text: str) -> set[str]:
    """``text`` as a JSON string's inside may spell it: as written plainly,
    and with every non-ASCII character, or HTML's ``<``, ``>`` and ``&``
    too, escaped as ``\\uXXXX`` (Chromium's writer escapes some of them)."""
    plain = json.dumps(text, ensure_ascii=False)[1:-1]
    ascii_only = json.dumps(text, ensure_ascii=True)[1:-1]
    html = ascii_only.replace("<", "\\u003C").replace(">", "\\u003E").replace("&", "\\u0026")
    lower = html.replace("\\u003C", "\\u003c").replace("\\u003E", "\\u003e")
    return {plain, ascii_only, html, lower}


class FillRefused(RelayError):
    """A fill, or a vault op, refused: the message says why and what to do,
    never a value."""

    status = 400


@dataclass(frozen=True)
class Credential:
    """One named credential. Its values never show in a ``repr``."""

    name: str
    origin: str
    username: SecretStr = field(repr=False)
    password: SecretStr = field(repr=False)
    #: The TOTP key (bytes of the base32 secret), None when it has none.
    totp_key: bytes | None = field(default=None, repr=False)

    @classmethod
    def of(
        cls,
        name: str,
        origin: str,
        username: SecretStr,
        password: SecretStr,
        totp_secret: SecretStr | None,
    ) -> Credential:
        key = secret_bytes(totp_secret.get_secret_value()) if totp_secret is not None else None
        return cls(name, origin, username, password, key)

    @property
    def fields(self) -> list[CredentialField]:
        return ["username", "password", "totp"] if self.totp_key else ["username", "password"]

    def value(self, which: CredentialField, now: float) -> str:
        """The text a fill of ``which`` types (a TOTP code made at ``now``)."""
        if which == "username":
            return self.username.get_secret_value()
        if which == "password":
            return self.password.get_secret_value()
        if self.totp_key is None:
            raise FillRefused(
                f"credential {self.name!r} has no TOTP secret: fill username or password, "
                "or set it again with totp_secret"
            )
        return code(self.totp_key, now)


class Vault:
    """Each scope's credentials by name (:data:`HOME`: a computer without scopes)."""

    def __init__(self, limit: int = MAX_CREDENTIALS) -> None:
        self._scopes: dict[str, dict[str, Credential]] = {}
        self.limit = limit
        #: Each scope's passwords filled so far, by credential, as a JSON
        #: string may spell them: what :meth:`scrub` withholds.
        self._filled: dict[str, dict[str, frozenset[str]]] = {}

    def filled(self, scope: str, credential: Credential, which: CredentialField) -> None:
        """A fill of ``which`` was typed in ``scope``: a password is withheld
        from that scope's agents from now on (:meth:`scrub`)."""
        if which == "password":
            text = credential.password.get_secret_value()
            self._filled.setdefault(scope, {})[credential.name] = frozenset(_spellings(text))

    def scrub(self, scope: str, data: str) -> str:
        """``data`` (a message to an agent of ``scope``) with every password
        filled there replaced by :data:`WITHHELD_TEXT`."""
        held = self._filled.get(scope)
        if not held:
            return data
        for spellings in held.values():
            for needle in spellings:
                if needle in data:
                    data = data.replace(needle, WITHHELD_TEXT)
        return data

    def __repr__(self) -> str:  # never the values, nor even the names
        return f"Vault({sum(len(c) for c in self._scopes.values())} credentials)"

    def set(self, scope: str, credential: Credential) -> None:
        held = self._scopes.setdefault(scope, {})
        if credential.name not in held and len(held) >= self.limit:
            raise FillRefused(
                f"this scope holds {self.limit} credentials already, the most it may: "
                "credentials/clear one first",
                409,
            )
        held[credential.name] = credential

    def get(self, scope: str, name: str) -> Credential:
        found = self._scopes.get(scope, {}).get(name)
        if found is None:
            raise FillRefused(
                f"no credential named {name[:64]!r} in this scope: credentials/list names them",
                404,
            )
        return found

    def listed(self, scope: str) -> list[CredentialInfo]:
        held = self._scopes.get(scope, {})
        return [
            CredentialInfo(name=c.name, origin=c.origin, fields=c.fields)
            for c in sorted(held.values(), key=lambda c: c.name)
        ]

    def clear(self, scope: str, name: str | None = None) -> int:
        """Drop one credential, or every one of ``scope``: how many went."""
        held = self._scopes.get(scope)
        if name is None:
            self._filled.pop(scope, None)
        else:
            self._filled.get(scope, {}).pop(name, None)
        if held is None:
            return 0
        if name is None:
            del self._scopes[scope]
            return len(held)
        gone = held.pop(name, None)
        if not held:
            del self._scopes[scope]
        return 0 if gone is None else 1

    def drop_all(self) -> None:
        """``data/reset`` (or Chromium gone with every scope): nothing is kept."""
        self._scopes.clear()
        self._filled.clear()


#: What the fill asks the tab, in the relay's isolated world: the focused
#: element's document origin and whether it takes text (see :func:`refusal`).
FILL_EXPRESSION = (
    "(() => {"
    + FOCUS_OF
    + r"""
  const found = focusOf();
  if (found.deep) return {deep: true};
  if (found.frame) {
    let src = null;
    try { src = new URL(found.frame.src || "about:blank", document.baseURI).origin; } catch (e) {}
    return {frame: src};
  }
  const el = found.el;
  if (!el) return {none: true};
  const doc = el.ownerDocument;
  const origin = doc.location ? doc.location.origin : "null";
  const tag = ("" + el.tagName).toLowerCase();
  const page = el === doc.body || el === doc.documentElement;
  const textlike = new Set(["", "text", "email", "password", "tel", "url", "search", "number"]);
  let editable = false;
  let type = null;
  if (tag === "input") {
    type = ("" + el.type).toLowerCase();
    editable = textlike.has(type) && !el.disabled && !el.readOnly;
  } else if (tag === "textarea") {
    editable = !el.disabled && !el.readOnly;
  } else {
    editable = !!el.isContentEditable;
  }
  return {origin: origin, tag: tag, type: type, page: page && !editable, editable: editable};
})()"""
)


def refusal(answer: object, origin: str) -> str | None:
    """Why a fill for ``origin`` must not type, given the ``Runtime.evaluate``
    answer of :data:`FILL_EXPRESSION` (None: it may). Any doubt refuses."""
    found = evaluated_value(answer)
    if not isinstance(found, Mapping):
        return (
            "the tab did not say where its focus is (a page loading, or not answering): "
            "retry once the page has loaded"
        )
    if found.get("deep"):
        return "the focus is nested too deep in shadow roots to check its origin"
    if "frame" in found:
        seen = found.get("frame")
        named = seen if isinstance(seen, str) and seen != "null" else "unknown (sandboxed)"
        return (
            f"the focused element is inside a frame of another origin ({named}), "
            f"not {origin}: credentials are typed only into a frame of their own origin"
        )
    if found.get("none") or found.get("page"):
        return "no field is focused: focus (click) the field to fill first"
    if not found.get("editable"):
        tag = str(found.get("tag") or "element")[:32]
        kind = found.get("type")
        what = f"{tag} type={str(kind)[:32]}" if kind else tag
        return (
            f"the focused element ({what}) does not take text: focus a text field, "
            "not disabled or read-only"
        )
    seen = found.get("origin")
    if not isinstance(seen, str) or seen != origin:
        shown = seen[:256] if isinstance(seen, str) else "unknown"
        return (
            f"the focused field's origin is {shown}, and this credential is for {origin} "
            "only: open that site to fill it"
        )
    return None
