"""Player tokens for bots: HS256 JWTs with the claims the server checks (issue 8), passed as
the `token` query parameter of the WebSocket URL, and the `role` parameter of spectators."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import jwt

__all__ = ["mint_token", "read_secret", "with_query"]


def mint_token(secret: str, player: str, name: str, role: str, ttl_s: float) -> str:
    claims = {"sub": player, "name": name, "role": role, "exp": int(time.time() + ttl_s)}
    return jwt.encode(claims, secret, algorithm="HS256")


def read_secret(secret: str | None, secret_file: str | None) -> str | None:
    """The secret given, or the first line of the file given; ValueError if it is empty."""
    if secret_file:
        try:
            secret = Path(secret_file).read_text().strip()
        except OSError as error:
            raise ValueError(f"--token-file: {error.strerror}: {secret_file}") from None
        if not secret:
            raise ValueError(f"--token-file: {secret_file} is empty")
    return secret or None


def with_query(url: str, **params: str) -> str:
    """The URL with these query parameters set (others kept)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query.update(params)
    return urlunsplit(parts._replace(query=urlencode(query)))
