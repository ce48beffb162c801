"""The credential vault's wire models (docs/spec.md section 3, "Credentials"):
the bodies of ``credentials/set``, ``credentials/list``, ``credentials/clear``
and ``credentials/fill``, and what they answer.

A credential's values (``username``, ``password``, ``totp_secret``) are
:class:`~pydantic.SecretStr` wherever a model holds them: a ``repr``, a
``str``, an f-string, a ``model_dump`` (either mode) shows ``**********``.
Only :func:`revealed` writes them out, for the one hop that carries them
(the app's control link to the relay, :class:`agentenv.protocol.control.SetCredential`).
A refusal names the field, never its value (:func:`agentenv.protocol.problems`
drops the input).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FieldSerializationInfo,
    SecretStr,
    field_serializer,
    field_validator,
)

from agentenv.protocol.browser import Scoped, origin_of
from agentenv.totp import secret_bytes

__all__ = [
    "MAX_CREDENTIALS",
    "REVEAL",
    "WITHHELD",
    "CredentialField",
    "CredentialFilled",
    "CredentialInfo",
    "CredentialList",
    "CredentialName",
    "CredentialsClear",
    "CredentialsCleared",
    "CredentialsFill",
    "CredentialsSet",
    "SecretValue",
    "check_origin",
    "check_totp",
    "revealed",
]

#: Credentials one scope may hold at once (a set past it is refused).
MAX_CREDENTIALS = 64

#: Which value a fill types.
CredentialField = Literal["username", "password", "totp"]

#: A credential's name: what the agent is told and the log keeps.
CredentialName = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]

#: A value an agent must never see (4 KiB at most: a password, not a file).
SecretValue = Annotated[SecretStr, Field(min_length=1, max_length=4096)]

#: What an entry of a fill keeps in the value's place: the recorder reads
#: this marker as typing into a password field on the entry's tab
#: (recorder/typed.py), so the network log withholds what the page sends next.
WITHHELD: dict[str, str] = {"withheld": "password"}

#: The serialization context under which :func:`revealed` writes secrets out.
REVEAL = {"agentenv_reveal": True}


def revealed(value: SecretStr | None, info: Any) -> str | None:
    """A secret's text when the dump was asked with :data:`REVEAL`, else masked."""
    if value is None:
        return None
    context = getattr(info, "context", None)
    if isinstance(context, dict) and context.get("agentenv_reveal") is True:
        return value.get_secret_value()
    return str(value)


def check_origin(value: str) -> str:
    """An origin, normalized (``https://bank.example``, default port dropped)."""
    return origin_of(value)


def check_totp(value: SecretStr | None) -> SecretStr | None:
    """A TOTP secret that reads as base32 (the error never quotes it)."""
    if value is not None:
        secret_bytes(value.get_secret_value())
    return value


class CredentialsSet(Scoped):
    """``credentials/set`` (control token): a named credential put into a
    scope, replacing one of the same name. ``origin`` is the only origin it
    is typed into (scheme, host and port, exactly)."""

    name: CredentialName
    origin: Annotated[str, Field(min_length=1, max_length=2048)]
    username: SecretValue
    password: SecretValue
    totp_secret: SecretValue | None = None

    # A refusal's text never quotes what was sent (pydantic's own str() would).
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    @field_validator("origin")
    @classmethod
    def _origin(cls, value: str) -> str:
        return check_origin(value)

    @field_serializer("username", "password", "totp_secret")
    def _secret(self, value: SecretStr | None, info: FieldSerializationInfo) -> str | None:
        # The harness's request (protocol.request_dump asks with REVEAL).
        return revealed(value, info)

    @field_validator("totp_secret")
    @classmethod
    def _totp(cls, value: SecretStr | None) -> SecretStr | None:
        return check_totp(value)


class CredentialsClear(Scoped):
    """``credentials/clear`` (control token): one credential, or every one of the scope."""

    name: CredentialName | None = None


class CredentialsFill(Scoped):
    """``credentials/fill``: type a credential's ``field`` into the focused
    field of the scope's active tab (an agent's token: its own scope only)."""

    name: CredentialName
    field: CredentialField


class CredentialInfo(BaseModel):
    """One credential as ``credentials/list`` shows it: never a value."""

    name: str
    origin: str
    #: Which fields it can fill (``totp`` only with a secret).
    fields: list[CredentialField]


class CredentialList(BaseModel):
    """``credentials/list``'s answer."""

    credentials: list[CredentialInfo]


class CredentialsCleared(BaseModel):
    """``credentials/clear``'s answer: how many went."""

    cleared: int


class CredentialFilled(BaseModel):
    """``credentials/fill``'s answer: what was filled where (never the value)."""

    name: str
    field: CredentialField
    tab: str
