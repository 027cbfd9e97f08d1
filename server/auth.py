"""Who a connection is: signed player tokens (JWT HS256) and the rules that admit a handshake.

A token names a player (`sub`), a display name and a role. Several nodes share one secret, so
a token minted anywhere is good on every node. With no secret configured the node runs in demo
mode: it makes its own random secret and hands every token-less connection a guest player and a
signed guest token to come back with. Everything here is pure of network and store: the
transport asks `AuthPolicy.authenticate` before the WebSocket upgrade and answers an `AuthError`
with its HTTP `status` and one-line `reason`.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import jwt

__all__ = [
    "ALGORITHM",
    "ANONYMOUS",
    "DEFAULT_GUEST_TTL_S",
    "DEFAULT_TOKEN_TTL_S",
    "MIN_SECRET_BYTES",
    "Admission",
    "AuthError",
    "AuthPolicy",
    "Identity",
    "Role",
    "check_player_id",
    "check_secret",
    "load_secret",
    "mint_token",
    "parse_query",
    "verify_token",
]

ALGORITHM = "HS256"
# RFC 7518 section 3.2: an HS256 key MUST have at least 256 bits (PyJWT warns below that).
MIN_SECRET_BYTES = 32
DEFAULT_TOKEN_TTL_S = 24 * 3600  # `baccarat token` without --ttl
DEFAULT_GUEST_TTL_S = 24 * 3600  # a guest token; renewed on every connection made with it
MAX_TTL_S = 10 * 366 * 24 * 3600
MAX_TOKEN_CHARS = 4096  # far above any token we mint; bounds the work on junk
MAX_NAME_CHARS = 64
IAT_LEEWAY_S = 60  # nodes' clocks may disagree a little; a token is never "from the future"
MAX_QUERY_FIELDS = 16

_PLAYER_ID = re.compile(r"[A-Za-z0-9._:@-]{1,64}")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_BEARER = re.compile(r"Bearer +(\S+)", re.IGNORECASE)
_ONE_BEARER = "the Authorization header must be one 'Bearer <token>'"


class Role(StrEnum):
    PLAYER = "player"  # has a wallet, may bet
    SPECTATOR = "spectator"  # joins, watches and replays; no wallet, no bets
    OPERATOR = "operator"  # moves money over HTTP; may watch, never bets


class AuthError(Exception):
    """A handshake or token refused: `status` is the HTTP answer, `reason` one line for people."""

    def __init__(self, reason: str, status: int = 401) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


@dataclass(frozen=True, slots=True)
class Identity:
    player: str | None  # None only for an anonymous spectator
    name: str
    role: Role
    guest: bool = False

    @property
    def may_bet(self) -> bool:
        return self.role is Role.PLAYER and self.player is not None

    @property
    def is_operator(self) -> bool:
        return self.role is Role.OPERATOR


ANONYMOUS = Identity(player=None, name="spectator", role=Role.SPECTATOR)


@dataclass(frozen=True, slots=True)
class Admission:
    """Who the connection is, and a token to hand back in `welcome.token` (guests only)."""

    identity: Identity
    token: str | None = None


# --- secrets and ids ----------------------------------------------------------------------


def load_secret(value: str | None) -> str | None:
    """The secret from --secret / BACCARAT_SECRET: the stripped contents of the file it names
    (a Docker or Kubernetes secret file), else the value itself; empty -> None (demo mode).
    Raises ValueError (one line) for a short secret, an empty or unreadable file, or a path
    that names no file."""
    if value is None or not value.strip():
        return None
    path = Path(value).expanduser()
    if path.is_file():
        try:
            secret = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"cannot read secret file {value}: {error}") from None
        if not secret:
            raise ValueError(f"secret file {value} is empty")
    elif value.startswith(("/", "./", "../", "~")):
        # A secret that looks like a path is a file that is missing, not a password.
        raise ValueError(f"no secret file at {value}")
    else:
        secret = value
    check_secret(secret)
    return secret


def check_secret(secret: str) -> None:
    size = len(secret.encode("utf-8"))
    if size < MIN_SECRET_BYTES:
        raise ValueError(
            f"secret is {size} bytes; it must have at least {MIN_SECRET_BYTES} "
            "(e.g. `openssl rand -hex 32`)"
        )


def check_player_id(player: object) -> str:
    """A player id is 1-64 characters of A-Z a-z 0-9 . _ : @ -; ValueError otherwise."""
    if not isinstance(player, str) or not _PLAYER_ID.fullmatch(player):
        raise ValueError(
            f"player id {player!r} must be 1-64 characters of letters, digits and . _ : @ -"
        )
    return player


def _check_name(name: object) -> str:
    if (
        not isinstance(name, str)
        or not 0 < len(name) <= MAX_NAME_CHARS
        or not name.isprintable()
        or name != name.strip()
    ):
        raise ValueError(
            f"name {name!r} must be 1-{MAX_NAME_CHARS} printable characters, "
            "no leading or trailing space"
        )
    return name


# --- tokens -------------------------------------------------------------------------------


def mint_token(
    secret: str,
    player: str,
    name: str | None = None,
    role: Role | str = Role.PLAYER,
    ttl_s: int = DEFAULT_TOKEN_TTL_S,
    guest: bool = False,
    now: float | None = None,
) -> str:
    """A signed token for `player` (claims sub, name, role, iat, exp, and guest when true).
    Raises ValueError naming a bad argument."""
    check_secret(secret)
    check_player_id(player)
    try:
        role = Role(role)
    except ValueError:
        raise ValueError(f"role {role!r} must be one of {', '.join(Role)}") from None
    if type(ttl_s) is not int or not 0 < ttl_s <= MAX_TTL_S:
        raise ValueError(f"ttl must be a whole number of seconds from 1 to {MAX_TTL_S}")
    issued = int(time.time() if now is None else now)
    claims: dict[str, Any] = {
        "sub": player,
        "name": _check_name(player if name is None else name),
        "role": role.value,
        "iat": issued,
        "exp": issued + ttl_s,
    }
    if guest:
        claims["guest"] = True
    return jwt.encode(claims, secret, algorithm=ALGORITHM)


def verify_token(secret: str, token: str, now: float | None = None) -> Identity:
    """The identity a token names, or AuthError(reason) if it is malformed, signed with another
    secret or altered, expired, issued in the future, or its claims are missing or wrong."""
    if not token or len(token) > MAX_TOKEN_CHARS:
        raise AuthError("token is empty or too long")
    claims = _decode(secret, token)
    at = time.time() if now is None else now
    exp, iat = _int_claim(claims, "exp"), _int_claim(claims, "iat")
    if at >= exp:
        raise AuthError("token expired")
    if iat > at + IAT_LEEWAY_S:
        raise AuthError("token issued in the future (check the clocks)")
    if "nbf" in claims and _int_claim(claims, "nbf") > at + IAT_LEEWAY_S:
        raise AuthError("token not valid yet")
    try:
        player = check_player_id(_claim(claims, "sub"))
        name = _check_name(claims.get("name", player))  # tokens minted elsewhere may omit it
        role = Role(_claim(claims, "role"))
    except ValueError as error:
        raise AuthError(f"bad token claims: {error}") from None
    guest = claims.get("guest", False)
    if type(guest) is not bool:
        raise AuthError("bad token claims: 'guest' must be true or false")
    return Identity(player=player, name=name, role=role, guest=guest)


def _decode(secret: str, token: str) -> dict[str, Any]:
    # Time claims are checked by verify_token against its own `now`, so tests need no sleep.
    options: Any = {"verify_exp": False, "verify_iat": False, "verify_nbf": False}
    try:
        claims: dict[str, Any] = jwt.decode(token, secret, algorithms=[ALGORITHM], options=options)
    except jwt.InvalidSignatureError:
        raise AuthError("token signature does not match (another secret, or altered)") from None
    except jwt.InvalidAlgorithmError:
        raise AuthError(f"token must be signed with {ALGORITHM}") from None
    except jwt.DecodeError:
        raise AuthError("token is malformed") from None
    except jwt.InvalidTokenError as error:
        raise AuthError(f"bad token claims: {error}") from None
    return claims


def _claim(claims: Mapping[str, Any], name: str) -> Any:
    if name not in claims:
        raise AuthError(f"token lacks the {name!r} claim")
    return claims[name]


def _int_claim(claims: Mapping[str, Any], name: str) -> int:
    value = _claim(claims, name)
    if type(value) is not int:
        raise AuthError(f"bad token claims: {name!r} must be an integer")
    return value


# --- the handshake ------------------------------------------------------------------------


def parse_query(path: str) -> dict[str, str]:
    """The query parameters of a request path ('/ws?token=...&role=spectator').
    A malformed query (bad percent-encoding, not UTF-8, a repeated or too many parameters)
    raises AuthError with status 400 rather than being guessed at."""
    _, _, raw = path.partition("?")
    raw = raw.partition("#")[0]
    if not raw:
        return {}
    if _BAD_PERCENT.search(raw):
        raise AuthError("bad percent-encoding in the query string", 400)
    try:
        pairs = parse_qsl(
            raw, keep_blank_values=True, errors="strict", max_num_fields=MAX_QUERY_FIELDS
        )
    except UnicodeDecodeError:
        raise AuthError("the query string is not UTF-8", 400) from None
    except ValueError:
        raise AuthError(f"more than {MAX_QUERY_FIELDS} query parameters", 400) from None
    query: dict[str, str] = {}
    for key, value in pairs:
        if key in query:
            raise AuthError(f"query parameter {key!r} given twice", 400)
        query[key] = value
    return query


def _authorization(headers: Mapping[str, str]) -> list[str]:
    """Every Authorization value of a request, in any case of the name. websockets' Headers
    refuses a plain lookup of any name given twice, and iterating its items looks up every
    name, so two Cookie, X-Forwarded-For or Sec-WebSocket-Protocol lines (all legal) would
    read as a bad Authorization: ask it for this one header only."""
    get_all = getattr(headers, "get_all", None)
    if callable(get_all):
        return [str(value) for value in get_all("Authorization")]
    return [value for key, value in headers.items() if key.lower() == "authorization"]


def _bearer(headers: Mapping[str, str]) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (any case), if there is one;
    AuthError for a malformed one or several (only a repeated Authorization is ambiguous)."""
    values = _authorization(headers)
    if not values:
        return None
    match = _BEARER.fullmatch(values[0].strip())
    if match is None or len(values) > 1:
        raise AuthError(_ONE_BEARER)
    return match.group(1)


def _presented_token(query: Mapping[str, str], headers: Mapping[str, str]) -> str | None:
    from_query, from_header = query.get("token"), _bearer(headers)
    if from_query is not None and from_header is not None and from_query != from_header:
        raise AuthError("two different tokens (query and Authorization header)")
    token = from_query if from_query is not None else from_header
    if token is not None and not token:
        raise AuthError("empty token")
    return token


def _wants_to_watch(query: Mapping[str, str]) -> bool:
    role = query.get("role", Role.PLAYER.value)
    if role not in (Role.PLAYER, Role.SPECTATOR):
        raise AuthError(f"role {role!r} must be player or spectator", 400)
    return role == Role.SPECTATOR


@dataclass(frozen=True, slots=True)
class AuthPolicy:
    """Who may connect. Build it with `configure` (demo mode when no secret is given)."""

    secret: str
    demo: bool = False  # no secret configured: `secret` is this node's own, random
    allow_guests: bool = False
    allow_anonymous_spectators: bool = False
    guest_ttl_s: int = DEFAULT_GUEST_TTL_S
    clock: Callable[[], float] = field(default=time.time, compare=False)

    def __post_init__(self) -> None:
        check_secret(self.secret)
        if not 0 < self.guest_ttl_s <= MAX_TTL_S:
            raise ValueError(f"guest ttl must be 1 to {MAX_TTL_S} seconds")

    @classmethod
    def configure(
        cls,
        secret: str | None,
        allow_guests: bool = False,
        allow_anonymous_spectators: bool | None = None,
        guest_ttl_s: int = DEFAULT_GUEST_TTL_S,
        clock: Callable[[], float] = time.time,
        demo_secret: str | None = None,
    ) -> AuthPolicy:
        """With a secret: guests only if allowed, anonymous spectators only if allowed (off by
        default). Without one (demo): `demo_secret` (the worker processes of one node share
        one) or a random secret, guests on, anonymous spectators on unless explicitly turned
        off."""
        demo = secret is None
        if secret is None:
            secret = demo_secret or secrets.token_urlsafe(MIN_SECRET_BYTES)
        return cls(
            secret=secret,
            demo=demo,
            allow_guests=demo or allow_guests,
            allow_anonymous_spectators=(
                demo if allow_anonymous_spectators is None else allow_anonymous_spectators
            ),
            guest_ttl_s=guest_ttl_s,
            clock=clock,
        )

    @property
    def guests_allowed(self) -> bool:
        return self.demo or self.allow_guests

    def authenticate(self, query: Mapping[str, str], headers: Mapping[str, str]) -> Admission:
        """Admit a handshake, or raise AuthError (401, or 400 for a malformed request)."""
        watch = _wants_to_watch(query)
        token = _presented_token(query, headers)
        if token is not None:
            return self._with_token(token, watch)
        if watch:
            if not self.allow_anonymous_spectators:
                raise AuthError("a token is required to watch")
            return Admission(ANONYMOUS)
        if self.guests_allowed:
            return self.new_guest()
        if self.allow_anonymous_spectators:
            return Admission(ANONYMOUS)  # no token, no guests: may watch, never bet
        raise AuthError("a token is required")

    def require_operator(self, headers: Mapping[str, str]) -> Identity:
        """The operator an HTTP request's `Authorization: Bearer` names: AuthError 401 without a
        valid token, 403 for a valid token of another role."""
        token = _bearer(headers)
        if token is None:
            raise AuthError("an operator token is required (Authorization: Bearer)")
        identity = verify_token(self.secret, token, now=self.clock())
        if not identity.is_operator:
            raise AuthError(f"role {identity.role.value} may not do this; operators only", 403)
        return identity

    def _with_token(self, token: str, watch: bool) -> Admission:
        identity = verify_token(self.secret, token, now=self.clock())
        if identity.guest and not self.guests_allowed:
            raise AuthError("guest tokens are not accepted here")
        # A guest's token is renewed on every connection, so a guest who keeps coming back
        # keeps its player; one who stays away longer than guest_ttl_s is gone.
        renewed = self._guest_token(identity) if identity.guest else None
        if watch and identity.role is Role.PLAYER:
            identity = Identity(identity.player, identity.name, Role.SPECTATOR, identity.guest)
        return Admission(identity, renewed)

    def new_guest(self) -> Admission:
        """A fresh guest player and its signed token."""
        player = "guest-" + secrets.token_hex(6)
        identity = Identity(player=player, name=player, role=Role.PLAYER, guest=True)
        return Admission(identity, self._guest_token(identity))

    def _guest_token(self, identity: Identity) -> str:
        assert identity.player is not None
        return mint_token(
            self.secret,
            identity.player,
            name=identity.name,
            ttl_s=self.guest_ttl_s,
            guest=True,
            now=self.clock(),
        )
