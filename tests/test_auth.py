"""Tokens, secrets, query strings and the handshake rules of issue 8, without a network."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import jwt
import pytest
from hypothesis import given
from hypothesis import strategies as st
from websockets.datastructures import Headers

from server.auth import (
    ANONYMOUS,
    IAT_LEEWAY_S,
    MIN_SECRET_BYTES,
    Admission,
    AuthError,
    AuthPolicy,
    Identity,
    Role,
    check_player_id,
    load_secret,
    mint_token,
    parse_query,
    verify_token,
)
from tests.test_architecture import imports_of

SECRET = "s" * MIN_SECRET_BYTES
OTHER = "o" * MIN_SECRET_BYTES
NOW = 1_800_000_000.0


def _claims(token: str) -> dict[str, Any]:
    """The claims of a token, read without checking anything."""
    decoded: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
    return decoded


def _raw(claims: dict[str, Any], secret: str = SECRET, algorithm: str = "HS256") -> str:
    """A token with exactly these claims, as another issuer could make it."""
    return jwt.encode(claims, secret, algorithm=algorithm)


def _good_claims(**changes: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "sub": "alice",
        "name": "Alice",
        "role": "player",
        "iat": int(NOW),
        "exp": int(NOW) + 60,
    }
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


def _refused(secret: str, token: str, now: float = NOW) -> str:
    with pytest.raises(AuthError) as caught:
        verify_token(secret, token, now=now)
    assert caught.value.status == 401
    assert "\n" not in caught.value.reason
    return caught.value.reason


# --- minting and verifying ------------------------------------------------------------------


def test_token_roundtrip_names_player_name_and_role() -> None:
    """A minted token verifies to the player, name and role it was made for."""
    token = mint_token(SECRET, "alice", name="Alice Smith", ttl_s=60, now=NOW)
    assert verify_token(SECRET, token, now=NOW) == Identity("alice", "Alice Smith", Role.PLAYER)


def test_token_claims_are_the_documented_ones() -> None:
    """Claims: sub, name, role, iat, exp (iat + ttl); no guest claim unless a guest."""
    token = mint_token(SECRET, "alice", name="Alice", ttl_s=90, now=NOW)
    assert _claims(token) == {
        "sub": "alice",
        "name": "Alice",
        "role": "player",
        "iat": int(NOW),
        "exp": int(NOW) + 90,
    }
    assert jwt.get_unverified_header(token)["alg"] == "HS256"


def test_name_defaults_to_the_player_id() -> None:
    """Without a name, the display name is the player id."""
    identity = verify_token(SECRET, mint_token(SECRET, "bob", now=NOW), now=NOW)
    assert identity.name == "bob"


def test_guest_token_roundtrip() -> None:
    """A guest token carries guest: true and verifies to a guest player."""
    token = mint_token(SECRET, "guest-0a1b2c3d4e5f", guest=True, now=NOW)
    assert _claims(token)["guest"] is True
    identity = verify_token(SECRET, token, now=NOW)
    assert identity == Identity("guest-0a1b2c3d4e5f", "guest-0a1b2c3d4e5f", Role.PLAYER, True)
    assert identity.may_bet


@pytest.mark.parametrize(
    ("role", "may_bet", "is_operator"),
    [("player", True, False), ("spectator", False, False), ("operator", False, True)],
)
def test_roles(role: str, may_bet: bool, is_operator: bool) -> None:
    """Each role verifies as itself; only players may bet, only operators operate."""
    identity = verify_token(SECRET, mint_token(SECRET, "p1", role=role, now=NOW), now=NOW)
    assert identity.role is Role(role)
    assert (identity.may_bet, identity.is_operator) == (may_bet, is_operator)


def test_token_expires_exactly_at_exp() -> None:
    """Valid until the second before exp; from exp on it is 'token expired'."""
    token = mint_token(SECRET, "alice", ttl_s=60, now=NOW)
    assert verify_token(SECRET, token, now=NOW + 59.9).player == "alice"
    assert _refused(SECRET, token, now=NOW + 60) == "token expired"
    assert _refused(SECRET, token, now=NOW + 10**6) == "token expired"


def test_expiry_uses_the_real_clock_by_default() -> None:
    """Without `now`, a token minted long ago is expired by the wall clock."""
    token = mint_token(SECRET, "alice", ttl_s=1, now=1_000_000)
    with pytest.raises(AuthError, match="expired"):
        verify_token(SECRET, token)


def test_token_from_the_future_is_refused_beyond_the_leeway() -> None:
    """A little clock skew between nodes is fine; an iat far ahead is not."""
    near = mint_token(SECRET, "alice", ttl_s=600, now=NOW + IAT_LEEWAY_S)
    assert verify_token(SECRET, near, now=NOW).player == "alice"
    far = mint_token(SECRET, "alice", ttl_s=600, now=NOW + IAT_LEEWAY_S + 1)
    assert "future" in _refused(SECRET, far)


def test_not_before_in_the_future_is_refused() -> None:
    """An nbf claim (from another issuer) is honoured."""
    token = _raw(_good_claims(nbf=int(NOW) + 3600, exp=int(NOW) + 7200))
    assert _refused(SECRET, token) == "token not valid yet"


def test_wrong_secret_is_refused() -> None:
    """A token signed with another secret: refused, saying the signature does not match."""
    token = mint_token(OTHER, "alice", now=NOW)
    assert "signature does not match" in _refused(SECRET, token)


def test_tampered_claims_are_refused() -> None:
    """Changing a claim (here the role) without the secret breaks the signature."""
    header, payload, signature = mint_token(SECRET, "alice", now=NOW).split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["role"] = "operator"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    assert "signature does not match" in _refused(SECRET, f"{header}.{forged}.{signature}")


def test_tampered_signature_is_refused() -> None:
    """A changed signature is refused."""
    token = mint_token(SECRET, "alice", now=NOW)
    flipped = token[:-2] + ("AA" if token[-2:] != "AA" else "BB")
    assert "signature" in _refused(SECRET, flipped) or "malformed" in _refused(SECRET, flipped)


@pytest.mark.parametrize("token", ["abc", "a.b.c", "x" * 100, "e30", "..."])
def test_malformed_tokens_are_refused(token: str) -> None:
    """Text that is not a JWT: 'token is malformed'."""
    assert _refused(SECRET, token) == "token is malformed"


@pytest.mark.parametrize("token", ["", "x" * 5000])
def test_empty_or_huge_tokens_are_refused(token: str) -> None:
    """Empty or absurdly long tokens are refused before any decoding."""
    assert _refused(SECRET, token) == "token is empty or too long"


def test_unsigned_and_other_algorithm_tokens_are_refused() -> None:
    """Only HS256: 'none' and HS512 tokens are refused even with the right secret."""
    unsigned = jwt.encode(_good_claims(), None, algorithm="none")
    assert _refused(SECRET, unsigned) == "token must be signed with HS256"
    hs512 = "h" * 64
    assert (
        _refused(hs512, _raw(_good_claims(), hs512, "HS512")) == "token must be signed with HS256"
    )


@pytest.mark.parametrize("claim", ["sub", "role", "iat", "exp"])
def test_missing_claims_are_refused(claim: str) -> None:
    """Each required claim missing: refused, naming it."""
    assert _refused(SECRET, _raw(_good_claims(**{claim: None}))) == (
        f"token lacks the {claim!r} claim"
    )


def test_a_token_without_name_uses_the_subject() -> None:
    """name is optional for tokens minted by other issuers: it defaults to sub."""
    identity = verify_token(SECRET, _raw(_good_claims(name=None)), now=NOW)
    assert identity.name == "alice"


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"role": "admin"}, "'admin' is not a valid Role"),
        ({"sub": "bad id!"}, "player id 'bad id!'"),
        ({"sub": "x" * 65}, "player id"),
        ({"sub": "é"}, "player id"),
        ({"sub": 42}, "bad token claims"),
        ({"exp": "soon"}, "'exp' must be an integer"),
        ({"iat": 1.5}, "'iat' must be an integer"),
        ({"exp": True}, "'exp' must be an integer"),
        ({"guest": "yes"}, "'guest' must be true or false"),
        ({"name": ""}, "name ''"),
        ({"name": "n" * 65}, "name"),
        ({"name": "two\nlines"}, "name"),
    ],
)
def test_bad_claims_are_refused(changes: dict[str, Any], words: str) -> None:
    """Claims of the wrong type or value: refused with a one-line reason naming the problem."""
    reason = _refused(SECRET, _raw(_good_claims(**changes)))
    assert reason.startswith(("bad token claims", "token lacks"))
    assert words in reason


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"player": "no spaces"}, "player id"),
        ({"player": ""}, "player id"),
        ({"role": "admin"}, "role 'admin' must be one of player, spectator, operator"),
        ({"ttl_s": 0}, "ttl"),
        ({"ttl_s": -5}, "ttl"),
        ({"ttl_s": 10**12}, "ttl"),
        ({"name": " padded"}, "name"),
        ({"secret": "short"}, "secret is 5 bytes"),
    ],
)
def test_mint_refuses_bad_arguments(kwargs: dict[str, Any], words: str) -> None:
    """mint_token names a bad player id, role, ttl, name or secret in a ValueError."""
    args: dict[str, Any] = {"secret": SECRET, "player": "alice", **kwargs}
    with pytest.raises(ValueError, match=words):
        mint_token(**args)


@pytest.mark.parametrize("player", ["a", "A.b_c:d@e-f", "0" * 64, "user@example.com"])
def test_player_ids_accepted(player: str) -> None:
    """Letters, digits and . _ : @ -, 1 to 64 of them."""
    assert check_player_id(player) == player


@pytest.mark.parametrize("player", ["", "0" * 65, "a b", "é", "a/b", "a\x00", 7, None])
def test_player_ids_refused(player: object) -> None:
    """Anything else is refused."""
    with pytest.raises(ValueError, match="player id"):
        check_player_id(player)


# --- secrets ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, "", "   "])
def test_no_secret_means_demo_mode(value: str | None) -> None:
    """An absent or empty secret is None: demo mode."""
    assert load_secret(value) is None


def test_secret_given_as_a_value() -> None:
    """A value that names no file is the secret itself."""
    assert load_secret(SECRET) == SECRET


def test_secret_read_from_a_file(tmp_path: Path) -> None:
    """A value naming a file gives its stripped contents (a Docker/Kubernetes secret file)."""
    path = tmp_path / "secret"
    path.write_text(f"  {OTHER}\n")
    assert load_secret(str(path)) == OTHER


@pytest.mark.parametrize("value", ["short", "x" * (MIN_SECRET_BYTES - 1)])
def test_short_secret_is_an_error(value: str) -> None:
    """A secret under 32 bytes is refused (RFC 7518 3.2 wants 256 bits for HS256)."""
    with pytest.raises(ValueError, match=f"at least {MIN_SECRET_BYTES}"):
        load_secret(value)


def test_short_secret_file_is_an_error(tmp_path: Path) -> None:
    """The rule holds for a secret read from a file."""
    path = tmp_path / "secret"
    path.write_text("tiny\n")
    with pytest.raises(ValueError, match="secret is 4 bytes"):
        load_secret(str(path))


def test_empty_secret_file_is_an_error(tmp_path: Path) -> None:
    """An empty secret file is a mistake, not demo mode."""
    path = tmp_path / "secret"
    path.write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        load_secret(str(path))


def test_missing_secret_file_is_an_error(tmp_path: Path) -> None:
    """A path that names no file is not taken as the secret."""
    with pytest.raises(ValueError, match="no secret file at"):
        load_secret(str(tmp_path / "missing" / "secret-file-that-is-long-enough"))


def test_unreadable_secret_file_is_an_error(tmp_path: Path) -> None:
    """A secret file that is not text is one clear error."""
    path = tmp_path / "secret"
    path.write_bytes(b"\xff\xfe" * 40)
    with pytest.raises(ValueError, match="cannot read secret file"):
        load_secret(str(path))


# --- query strings ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/ws", {}),
        ("/ws?", {}),
        ("/ws?token=abc&role=spectator", {"token": "abc", "role": "spectator"}),
        ("/ws?token=a%2Eb+c", {"token": "a.b c"}),
        ("/ws?token=", {"token": ""}),
        ("/ws?name=%C3%A9", {"name": "é"}),
        ("/ws?a=1#frag", {"a": "1"}),
    ],
)
def test_parse_query(path: str, query: dict[str, str]) -> None:
    """Parameters are percent-decoded; blank values are kept; a fragment is ignored."""
    assert parse_query(path) == query


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("/ws?token=%zz", "bad percent-encoding"),
        ("/ws?token=abc%", "bad percent-encoding"),
        ("/ws?token=%4", "bad percent-encoding"),
        ("/ws?token=%ff%fe", "not UTF-8"),
        ("/ws?token=a&token=b", "'token' given twice"),
        ("/ws?" + "&".join(f"k{i}=v" for i in range(40)), "more than 16"),
    ],
)
def test_parse_query_refuses_malformed(path: str, words: str) -> None:
    """A malformed query is refused with 400 and a one-line reason, never guessed at."""
    with pytest.raises(AuthError, match=words) as caught:
        parse_query(path)
    assert caught.value.status == 400


@given(st.text(max_size=200))
def test_parse_query_never_crashes(tail: str) -> None:
    """Whatever follows the '?', parse_query returns a dict or raises AuthError (400)."""
    try:
        result = parse_query("/ws?" + tail)
    except AuthError as error:
        status = error.status
    else:
        status = 400
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in result.items())
    assert status == 400


# --- the handshake rules ----------------------------------------------------------------------


def _policy(secret: str | None, **options: Any) -> AuthPolicy:
    return AuthPolicy.configure(secret, clock=lambda: NOW, **options)


def _admit(policy: AuthPolicy, headers: dict[str, str] | None = None, **query: str) -> Admission:
    return policy.authenticate(query, headers or {})


def _refuse(policy: AuthPolicy, headers: dict[str, str] | None = None, **query: str) -> AuthError:
    with pytest.raises(AuthError) as caught:
        policy.authenticate(query, headers or {})
    assert "\n" not in caught.value.reason
    return caught.value


def _token(role: str = "player", player: str = "alice", secret: str = SECRET, **kw: Any) -> str:
    return mint_token(secret, player, role=role, now=NOW, **kw)


def test_configure_demo_mode() -> None:
    """No secret: demo mode with the node's own random secret, guests and spectators on."""
    policy = AuthPolicy.configure(None)
    assert policy.demo and policy.allow_guests and policy.allow_anonymous_spectators
    assert len(policy.secret.encode()) >= MIN_SECRET_BYTES
    assert AuthPolicy.configure(None).secret != policy.secret  # each node its own


@pytest.mark.parametrize(("secret", "ttl"), [("short", 60), (SECRET, 0)])
def test_policy_refuses_a_short_secret_or_no_ttl(secret: str, ttl: int) -> None:
    """A policy cannot be built with a weak secret or a guest TTL that is not positive."""
    with pytest.raises(ValueError):
        AuthPolicy.configure(secret, guest_ttl_s=ttl)


def test_configure_with_a_secret() -> None:
    """With a secret: no guests, no anonymous spectators unless allowed."""
    policy = AuthPolicy.configure(SECRET)
    assert (policy.demo, policy.guests_allowed, policy.allow_anonymous_spectators) == (
        False,
        False,
        False,
    )
    allowing = AuthPolicy.configure(SECRET, allow_guests=True, allow_anonymous_spectators=True)
    assert allowing.guests_allowed and allowing.allow_anonymous_spectators


def test_demo_without_token_is_a_new_guest_with_a_token() -> None:
    """Demo mode: no token -> a fresh guest player and a signed guest token for welcome.token."""
    policy = _policy(None)
    admission = _admit(policy)
    identity = admission.identity
    assert identity.player is not None and identity.player.startswith("guest-")
    assert len(identity.player) == len("guest-") + 12
    assert (identity.role, identity.guest) == (Role.PLAYER, True)
    assert admission.token is not None
    assert verify_token(policy.secret, admission.token, now=NOW) == identity
    assert _admit(policy).identity.player != identity.player  # each one new


def test_demo_reconnect_with_the_guest_token_is_the_same_player() -> None:
    """Coming back with the guest token is the same player, and the token is renewed."""
    policy = _policy(None)
    first = _admit(policy)
    assert first.token is not None
    later = AuthPolicy(
        policy.secret, demo=True, allow_guests=True, guest_ttl_s=policy.guest_ttl_s,
        clock=lambda: NOW + 3600,
    )  # fmt: skip
    again = _admit(later, token=first.token)
    assert again.identity == first.identity
    assert again.token is not None
    assert _claims(again.token)["exp"] == int(NOW) + 3600 + policy.guest_ttl_s


def test_demo_guest_token_from_another_node_is_refused() -> None:
    """Without a shared secret, each demo node signs with its own: another's token is 401."""
    token = _admit(_policy(None)).token
    assert token is not None
    error = _refuse(_policy(None), token=token)
    assert error.status == 401
    assert "signature" in error.reason


def test_demo_expired_guest_token_is_refused() -> None:
    """A guest token past its TTL is refused (the guest expired)."""
    policy = _policy(None, guest_ttl_s=60)
    token = _admit(policy).token
    assert token is not None
    late = AuthPolicy(policy.secret, demo=True, allow_guests=True, clock=lambda: NOW + 61)
    assert _refuse(late, token=token).reason == "token expired"


def test_demo_spectator_without_token() -> None:
    """Demo mode: ?role=spectator without a token is an anonymous spectator, no token back."""
    admission = _admit(_policy(None), role="spectator")
    assert admission == Admission(ANONYMOUS)
    assert ANONYMOUS.player is None and not ANONYMOUS.may_bet


def test_demo_can_turn_anonymous_spectators_off() -> None:
    """allow_anonymous_spectators=False holds in demo mode too."""
    policy = _policy(None, allow_anonymous_spectators=False)
    assert _refuse(policy, role="spectator").reason == "a token is required to watch"
    assert _admit(policy).identity.guest  # players still get guests


def test_demo_accepts_a_token_it_signed_for_a_named_player() -> None:
    """Demo mode verifies any token made with its secret, not only guest tokens."""
    policy = _policy(None)
    admission = _admit(policy, token=_token(secret=policy.secret))
    assert admission == Admission(Identity("alice", "alice", Role.PLAYER))


def test_secret_without_token_is_refused() -> None:
    """A secret, no guests, no anonymous spectators: no token -> 401."""
    error = _refuse(_policy(SECRET))
    assert (error.status, error.reason) == (401, "a token is required")
    assert _refuse(_policy(SECRET), role="spectator").reason == "a token is required to watch"


def test_secret_without_token_is_a_spectator_when_allowed() -> None:
    """A secret, no guests, anonymous spectators on: no token -> a spectator that cannot bet."""
    policy = _policy(SECRET, allow_anonymous_spectators=True)
    assert _admit(policy) == Admission(ANONYMOUS)
    assert _admit(policy, role="spectator") == Admission(ANONYMOUS)


def test_secret_with_guests_allowed() -> None:
    """--allow-guests: no token -> a guest whose token is signed with the configured secret."""
    policy = _policy(SECRET, allow_guests=True, allow_anonymous_spectators=True)
    admission = _admit(policy)
    assert admission.identity.guest and admission.token is not None
    assert verify_token(SECRET, admission.token, now=NOW) == admission.identity
    assert _admit(policy, role="spectator") == Admission(ANONYMOUS)


def test_secret_refuses_guest_tokens_when_guests_are_off() -> None:
    """A guest token is refused where guests are not allowed (even with the right secret)."""
    guest = mint_token(SECRET, "guest-abc", guest=True, now=NOW)
    assert _refuse(_policy(SECRET), token=guest).reason == "guest tokens are not accepted here"


def test_player_token_with_a_secret() -> None:
    """A valid player token is that player; no token is handed back."""
    admission = _admit(_policy(SECRET), token=_token(name="Alice"))
    assert admission == Admission(Identity("alice", "Alice", Role.PLAYER))


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (mint_token(OTHER, "alice", now=NOW), "signature does not match"),
        (mint_token(SECRET, "alice", ttl_s=10, now=NOW - 11), "token expired"),
        ("not-a-token", "token is malformed"),
    ],
)
def test_bad_tokens_are_401(token: str, reason: str) -> None:
    """Wrong secret, expired or malformed: 401 with a one-line reason."""
    for policy in (_policy(SECRET), _policy(SECRET, allow_anonymous_spectators=True)):
        error = _refuse(policy, token=token)
        assert error.status == 401 and reason in error.reason
        assert reason in _refuse(policy, token=token, role="spectator").reason


def test_spectator_token_makes_a_spectator() -> None:
    """A token with role spectator is a spectator, asked to watch or not."""
    for query in ({}, {"role": "spectator"}):
        admission = _admit(_policy(SECRET), token=_token("spectator", "viewer-1"), **query)
        assert admission.identity == Identity("viewer-1", "viewer-1", Role.SPECTATOR)
        assert not admission.identity.may_bet


def test_player_asking_to_watch_is_a_spectator() -> None:
    """?role=spectator with a player token watches under the player's id, without betting."""
    identity = _admit(_policy(SECRET), token=_token(), role="spectator").identity
    assert identity == Identity("alice", "alice", Role.SPECTATOR)
    assert not identity.may_bet


def test_operator_token_is_an_operator_who_cannot_bet() -> None:
    """Operator tokens are operators (they may watch), never bettors."""
    for query in ({}, {"role": "spectator"}):
        identity = _admit(_policy(SECRET), token=_token("operator", "ops"), **query).identity
        assert identity.role is Role.OPERATOR and identity.is_operator and not identity.may_bet


def test_bearer_header_is_accepted() -> None:
    """Authorization: Bearer works like ?token=, with any header or scheme case."""
    token = _token()
    for headers in (
        {"Authorization": f"Bearer {token}"},
        {"authorization": f"bearer  {token} "},
    ):
        assert _admit(_policy(SECRET), headers).identity.player == "alice"
    ws_headers = Headers(Authorization=f"Bearer {token}")
    assert _policy(SECRET).authenticate({}, ws_headers).identity.player == "alice"


@pytest.mark.parametrize("value", ["Basic dXNlcjpwYXNz", "Bearer", "Bearer a b", "token"])
def test_bad_authorization_header_is_401(value: str) -> None:
    """An Authorization header that is not one 'Bearer <token>' is refused."""
    error = _refuse(_policy(None), {"Authorization": value})
    assert error.status == 401 and "Bearer" in error.reason


def test_two_authorization_headers_are_refused() -> None:
    """Several Authorization headers are ambiguous: refused."""
    headers = Headers()
    headers["Authorization"] = f"Bearer {_token()}"
    headers["Authorization"] = "Bearer other"
    with pytest.raises(AuthError, match="one 'Bearer <token>'"):
        _policy(SECRET).authenticate({}, headers)


def test_other_repeated_headers_leave_the_authorization_readable() -> None:
    """websockets' Headers with two Cookie lines refuses a lookup of Cookie: that is no
    reason to refuse the one Authorization header (it was 401 "must be one 'Bearer'")."""
    headers = Headers()
    for name, value in (("Cookie", "a=1"), ("Cookie", "b=2"), ("X-Forwarded-For", "10.0.0.1")):
        headers[name] = value
    headers["X-Forwarded-For"] = "10.0.0.2"
    headers["authorization"] = f"Bearer {_token()}"
    assert _policy(SECRET).authenticate({}, headers).identity.player == "alice"


def test_query_and_header_tokens_must_agree() -> None:
    """The same token twice is fine; two different tokens are refused."""
    token = _token()
    header = {"Authorization": f"Bearer {token}"}
    assert _admit(_policy(SECRET), header, token=token).identity.player == "alice"
    error = _refuse(_policy(SECRET), header, token=_token(player="bob"))
    assert error.reason == "two different tokens (query and Authorization header)"


def test_empty_token_is_refused() -> None:
    """?token= with nothing is a missing token said plainly, not a guest."""
    assert _refuse(_policy(None), token="").reason == "empty token"


@pytest.mark.parametrize("role", ["operator", "admin", ""])
def test_unknown_requested_role_is_400(role: str) -> None:
    """?role= may only be player or spectator."""
    error = _refuse(_policy(None), role=role)
    assert error.status == 400
    assert "must be player or spectator" in error.reason


def test_role_player_is_the_default() -> None:
    """?role=player asks to play, like no role at all."""
    assert _admit(_policy(None), role="player").identity.guest


def test_two_nodes_sharing_a_secret_accept_each_others_tokens() -> None:
    """A token minted for one node (or by `baccarat token`) is good on another."""
    guest = _admit(_policy(SECRET, allow_guests=True)).token
    assert guest is not None
    other_node = _policy(SECRET, allow_guests=True)
    assert _admit(other_node, token=guest).identity.guest


@given(st.text(max_size=300))
def test_authenticate_never_crashes_on_junk_tokens(token: str) -> None:
    """Any token text is admitted or refused with AuthError; nothing else escapes."""
    status = 401
    try:
        _policy(SECRET).authenticate({"token": token}, {})
    except AuthError as error:
        status = error.status
    assert status == 401


# --- the operator API ---------------------------------------------------------------------------


def test_require_operator_accepts_an_operator_token() -> None:
    """An operator's Bearer token names the operator."""
    headers = {"Authorization": f"Bearer {_token('operator', 'ops')}"}
    assert _policy(SECRET).require_operator(headers) == Identity("ops", "ops", Role.OPERATOR)


def test_require_operator_refuses_missing_or_bad_tokens_with_401() -> None:
    """No token, a bad one, or a query-less request without the header: 401."""
    policy = _policy(SECRET)
    for headers in ({}, {"Authorization": "Bearer junk"}, {"Authorization": "Basic x"}):
        with pytest.raises(AuthError) as caught:
            policy.require_operator(headers)
        assert caught.value.status == 401


@pytest.mark.parametrize("role", ["player", "spectator"])
def test_require_operator_refuses_other_roles_with_403(role: str) -> None:
    """A valid token of another role: 403."""
    headers = {"Authorization": f"Bearer {_token(role)}"}
    with pytest.raises(AuthError, match="operators only") as caught:
        _policy(SECRET).require_operator(headers)
    assert caught.value.status == 403


def test_auth_module_stays_off_the_network() -> None:
    """server/auth.py imports no server layer, no event loop and no network or store library."""
    path = Path(__file__).resolve().parents[1] / "server" / "auth.py"
    tops = {name.split(".")[0] for _, name in imports_of(path.read_text(), "server.auth")}
    assert tops.isdisjoint({"server", "asyncio", "websockets", "redis", "msgpack", "structlog"})
    assert "jwt" in tops
