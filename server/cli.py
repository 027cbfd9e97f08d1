"""The `baccarat` command: resolve coups, compute exact odds, draw roads, serve, verify a
table's shoes (`verify`), and run the reference wallet (`wallet-demo`).

Every error (bad card, too few cards, bad option, bad road letter) is one line on stderr,
prefixed by the subcommand, with exit status 2. `coup` ignores cards the coup does not need
(its `cards_used` says how many it took): a shoe's worth of cards can be passed as is.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, NoReturn, TextIO

from server.auth import DEFAULT_TOKEN_TTL_S, Role, load_secret, mint_token
from server.config import add_serve_arguments
from server.core.bets import Paytable, Spot
from server.core.cards import Card, parse_card
from server.core.coup import resolve_coup
from server.core.errors import CardError, NotEnoughCards
from server.core.odds import compute_odds, house_edges, shoe_after
from server.core.roads import build_roads, parse_results

if TYPE_CHECKING:
    from server.store.base import Store

__all__ = ["build_parser", "main"]

Handler = Callable[[argparse.Namespace], int]
USAGE_ERROR = 2
_SEPARATORS = str.maketrans(",;", "  ")


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line on stderr with status 2, like every other error here."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: {message}\n")


def _fail(prog: str, message: str) -> int:
    print(f"{prog}: {message}", file=sys.stderr)
    return USAGE_ERROR


def _split_cards(texts: Iterable[str]) -> list[str]:
    """Card words from arguments or a line: whitespace, commas and semicolons separate."""
    return [word for text in texts for word in text.translate(_SEPARATORS).split()]


def _coup_json(words: list[str]) -> str:
    """One coup as a JSON line; raises CardError or NotEnoughCards naming the problem."""
    coup = resolve_coup([parse_card(word) for word in words])
    return json.dumps(coup.to_dict())


# --- coup ------------------------------------------------------------------------------------


def _run_coup(args: argparse.Namespace) -> int:
    if not args.cards:
        return _coup_lines(sys.stdin, sys.stdout)
    try:
        print(_coup_json(_split_cards(args.cards)))
    except (CardError, NotEnoughCards) as exc:
        return _fail("baccarat coup", str(exc))
    return 0


def _coup_lines(source: TextIO, out: TextIO) -> int:
    """One coup per non-blank line; a bad line is reported by number and the rest still run."""
    status = 0
    for number, line in enumerate(source, start=1):
        words = _split_cards([line])
        if not words:
            continue
        try:
            print(_coup_json(words), file=out, flush=True)
        except (CardError, NotEnoughCards) as exc:
            status = _fail("baccarat coup", f"line {number}: {exc}")
    return status


def _add_coup(subparsers: argparse._SubParsersAction[_Parser]) -> None:
    parser = subparsers.add_parser(
        "coup",
        help="resolve one coup from cards in shoe order",
        description="Resolve a coup from cards in shoe order (P1 B1 P2 B2, then thirds). "
        "Cards the coup does not need are ignored; cards_used says how many it took. "
        "With no cards, read one coup per line from stdin and print one JSON object per line.",
    )
    parser.add_argument("cards", nargs="*", metavar="CARD", help="e.g. Kh 5 3d 10 or T for 10")
    parser.set_defaults(handler=_run_coup)


# --- odds ------------------------------------------------------------------------------------


def _decks(text: str) -> int:
    try:
        decks = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of decks: {text!r}") from None
    if not 1 <= decks <= 8:
        raise argparse.ArgumentTypeError(f"decks must be 1-8, got {decks}")
    return decks


def _commission(text: str) -> int:
    """Basis points ('500') or a percent ('5%', '2.5%') -> basis points."""
    try:
        bp = Fraction(text[:-1]) * 100 if text.endswith("%") else Fraction(int(text))
    except (ValueError, ZeroDivisionError, OverflowError):
        message = f"{text!r}: give basis points (500) or a percent (5%)"
        raise argparse.ArgumentTypeError(message) from None
    if bp.denominator != 1 or not 0 <= bp <= 10_000:
        raise argparse.ArgumentTypeError(f"{text!r}: must be whole basis points from 0 to 10000")
    return int(bp)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text!r}")
    return value


def _paytable(args: argparse.Namespace) -> Paytable:
    return Paytable(
        banker_commission_bp=args.commission,
        no_commission=args.no_commission,
        tie_pays=args.tie_pays,
        pair_pays=args.pair_pays,
    )


@dataclass(frozen=True, slots=True)
class _OddsResult:
    decks: int
    dealt: tuple[Card, ...]
    cards_left: int
    paytable: Paytable
    wins: dict[Spot, Fraction]
    edges: dict[Spot, Fraction]

    def to_dict(self) -> dict[str, object]:
        return {
            "decks": self.decks,
            "dealt": [str(card) for card in self.dealt],
            "cards_left": self.cards_left,
            "paytable": {
                "banker_commission_bp": self.paytable.banker_commission_bp,
                "no_commission": self.paytable.no_commission,
                "tie_pays": self.paytable.tie_pays,
                "pair_pays": self.paytable.pair_pays,
            },
            **{spot.value: float(prob) for spot, prob in self.wins.items()},
            "house_edge": {spot.value: float(edge) for spot, edge in self.edges.items()},
            "exact": {
                **{spot.value: str(prob) for spot, prob in self.wins.items()},
                "house_edge": {spot.value: str(edge) for spot, edge in self.edges.items()},
            },
        }

    def table(self) -> str:
        pay = self.paytable
        banker = (
            "1:1, 1:2 on a winning 6"
            if pay.no_commission
            else f"1:1 less {pay.banker_commission_bp / 100:g}% commission"
        )
        lines = [
            f"{self.decks} decks, {self.cards_left} cards left ({len(self.dealt)} dealt)",
            f"Banker {banker}; Player 1:1; Tie {pay.tie_pays}:1; pairs {pay.pair_pays}:1",
            "",
            f"{'bet':<12} {'P(win)':>12} {'house edge':>12}",
        ]
        for spot in Spot:
            prob, edge = float(self.wins[spot]), float(self.edges[spot])
            lines.append(f"{spot.value:<12} {prob:>12.10f} {edge:>12.6%}")
        return "\n".join(lines)


def _run_odds(args: argparse.Namespace) -> int:
    try:
        dealt = tuple(parse_card(word) for word in _split_cards(args.dealt))
        shoe = shoe_after(args.decks, dealt)
        odds = compute_odds(shoe)
    except ValueError as exc:  # CardError is a ValueError
        return _fail("baccarat odds", f"--dealt: {exc}")
    paytable = _paytable(args)
    wins = {spot: odds.win_probability(spot) for spot in Spot}
    result = _OddsResult(args.decks, dealt, shoe.total, paytable, wins, house_edges(odds, paytable))
    print(json.dumps(result.to_dict()) if args.json else result.table())
    return 0


def _add_odds(subparsers: argparse._SubParsersAction[_Parser]) -> None:
    parser = subparsers.add_parser(
        "odds",
        help="exact probabilities and house edges for a shoe",
        description="Exact odds by enumerating every coup (P1 B1 P2 B2 P3 B3, with depletion).",
    )
    parser.add_argument("--decks", type=_decks, default=8, help="decks in the shoe, 1-8 (8)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    banker = parser.add_mutually_exclusive_group()
    banker.add_argument(
        "--commission", type=_commission, default=500, help="Banker commission: 500 or 5%% (5%%)"
    )
    banker.add_argument(
        "--no-commission", action="store_true", help="Banker pays 1:1, only 1:2 on a winning 6"
    )
    parser.add_argument("--tie-pays", type=int, choices=(8, 9), default=8, help="N to 1 (8)")
    parser.add_argument("--pair-pays", type=_positive, default=11, help="N to 1 (11)")
    parser.add_argument(
        "--dealt",
        action="append",
        default=[],
        metavar="CARDS",
        help="cards already out of the shoe, e.g. 'Kh 5 3d' (repeatable)",
    )
    parser.set_defaults(handler=_run_odds)


# --- roads and serve -------------------------------------------------------------------------


def _run_roads(args: argparse.Namespace) -> int:
    try:
        results = parse_results("".join(args.sequence))
        roads = build_roads(results, args.pairs)
    except ValueError as exc:
        return _fail("baccarat roads", str(exc))
    print(json.dumps(roads.to_dict()))
    return 0


def _add_roads(subparsers: argparse._SubParsersAction[_Parser]) -> None:
    parser = subparsers.add_parser(
        "roads",
        help="scoreboard roads for a sequence of results",
        description="Bead plate, Big Road and the derived roads as JSON.",
    )
    parser.add_argument("sequence", nargs="+", help="results as letters B P T, e.g. BPPBTB")
    parser.add_argument(
        "--pairs",
        default="",
        metavar="CODES",
        help="each result's pairs, one digit per result: 0 none, 1 Player pair, 2 Banker "
        "pair, 3 both, e.g. 010300 (results without a digit had no pair)",
    )
    parser.set_defaults(handler=_run_roads)


def _run_serve(args: argparse.Namespace) -> int:
    app = importlib.import_module("server.app")  # lazy: the other commands need no server deps
    try:
        status: object = app.serve_from_args(args)
    except ValueError as error:  # a bad setting: one line, like every other error here
        return _fail("baccarat serve", str(error))
    return status if isinstance(status, int) else 0


def _add_serve(subparsers: argparse._SubParsersAction[_Parser]) -> argparse.ArgumentParser:
    """Register `serve`; its options belong to server.app and are added here."""
    parser = subparsers.add_parser("serve", help="run the Live Baccarat server")
    add_serve_arguments(parser)
    parser.set_defaults(handler=_run_serve)
    return parser


# --- token -----------------------------------------------------------------------------------


def _run_token(args: argparse.Namespace) -> int:
    value = args.secret if args.secret is not None else os.environ.get("BACCARAT_SECRET")
    try:
        secret = load_secret(value)
        if secret is None:
            return _fail("baccarat token", "no secret: pass --secret or set BACCARAT_SECRET")
        print(mint_token(secret, args.player, name=args.name, role=args.role, ttl_s=args.ttl))
    except ValueError as error:  # a short or unreadable secret, a bad id or name
        return _fail("baccarat token", str(error))
    return 0


def _add_token(subparsers: argparse._SubParsersAction[_Parser]) -> None:
    parser = subparsers.add_parser(
        "token",
        help="mint a signed token for a player, spectator or operator",
        description="Print a signed token (JWT HS256) naming a player, for the WebSocket "
        "(?token=...) or the operator API (Authorization: Bearer ...). Every node that shares "
        "the secret accepts it.",
    )
    parser.add_argument(
        "--player", required=True, help="the player id: 1-64 of A-Z a-z 0-9 . _ : @ -"
    )
    parser.add_argument("--name", help="display name (default: the player id)")
    parser.add_argument(
        "--role", choices=[role.value for role in Role], default=Role.PLAYER.value, help="(player)"
    )
    parser.add_argument(
        "--ttl",
        type=_positive,
        default=DEFAULT_TOKEN_TTL_S,
        metavar="SECONDS",
        help=f"seconds the token stays valid ({DEFAULT_TOKEN_TTL_S})",
    )
    parser.add_argument(
        "--secret",
        help="the shared secret, or a file holding it (default: $BACCARAT_SECRET)",
    )
    parser.set_defaults(handler=_run_token)


# --- bots (issue 10; the options and the run belong to server.bots) --------------------------


def _run_bots(args: argparse.Namespace) -> int:
    runner = importlib.import_module("server.bots.runner")  # lazy, like serve
    status: int = runner.run_from_args(args)
    return status


def _add_bots(subparsers: argparse._SubParsersAction[_Parser]) -> None:
    from server.bots.options import add_bots_arguments

    parser = subparsers.add_parser(
        "bots",
        help="load a site with bots that check every round",
        description="Player and spectator bots that join tables, bet, and check every round\n"
        "they see with the game core; the JSON report says what was checked and found.",
    )
    add_bots_arguments(parser)
    parser.set_defaults(handler=_run_bots)


# --- audit (issue 18; the options and the run belong to server.audit_cli) ---------------------


def _open_redis(url: str, key_prefix: str, audit_keep_ms: int) -> Store:
    from server.store.redis import RedisStore  # lazy, as `serve` loads it

    return RedisStore.from_url(url, key_prefix=key_prefix, audit_keep_ms=audit_keep_ms)


def _run_audit(args: argparse.Namespace) -> int:
    from server.audit_cli import run_audit

    return run_audit(args, _open_redis)


def _add_audit(subparsers: argparse._SubParsersAction[_Parser]) -> None:
    from server.audit_cli import add_audit_arguments

    parser = subparsers.add_parser(
        "audit",
        help="print a player's audit log: every movement of its money",
        description="Print a player's audit log, oldest first: each bet, settlement, refund, "
        "operator credit or debit, initial balance and guest expiry, with the balance after. "
        "Read from a node's admin listener (--url) or the Redis engine's store (--redis).",
    )
    add_audit_arguments(parser)
    parser.set_defaults(handler=_run_audit)


# --- verify (issue 18; the options and the run belong to server.verify.command) ---------------


def _run_verify(args: argparse.Namespace) -> int:
    from server.verify.command import run_verify

    return run_verify(args)


def _add_verify(subparsers: argparse._SubParsersAction[_Parser]) -> None:
    from server.verify.command import EPILOG, add_verify_arguments

    parser = subparsers.add_parser(
        "verify",
        help="check a table's committed shoes, card by card, from its events",
        description="Check a table's bac-shoe-v1 shoes (docs/fairness.md) from its events: "
        "a file of JSON lines or msgpack, stdin (-), or a running server (--url, --table).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_verify_arguments(parser)
    parser.set_defaults(handler=_run_verify)


# --- wallet-pending (issue 19; the command belongs to server.wallet_pending_cli) ------------


def _run_wallet_pending(args: argparse.Namespace) -> int:
    from server.store.redis import RedisStore  # lazy, as `serve` loads it
    from server.wallet_pending_cli import run_wallet_pending

    def open_redis(url: str, key_prefix: str) -> Store:
        return RedisStore.from_url(url, key_prefix=key_prefix)

    return run_wallet_pending(args, open_redis)


def _add_wallet_pending(subparsers: argparse._SubParsersAction[_Parser]) -> None:
    from server.wallet_pending_cli import add_wallet_pending_arguments

    parser = subparsers.add_parser(
        "wallet-pending",
        help="list the debits of an operator's wallet with neither a credit nor a cancel "
        "acknowledged",
        description="List the debits an operator's wallet (docs/wallet.md) holds with neither a "
        "credit nor a cancel acknowledged: in flight, in play, or in a credit or cancel the "
        "wallet has not acknowledged (queued or parked). Read from a node's admin listener "
        "(--url) or the Redis engine's store (--redis).",
    )
    add_wallet_pending_arguments(parser)
    parser.set_defaults(handler=_run_wallet_pending)


# --- wallet-demo (issue 19; the reference wallet belongs to server.wallet.demo) -------------


def _run_wallet_demo(args: argparse.Namespace) -> int:
    demo = importlib.import_module("server.wallet.demo")  # lazy: aiohttp's server and sqlite
    try:
        status: int = demo.run_from_args(args)
    except ValueError as error:  # a bad setting: one line, like every other error here
        return _fail("baccarat wallet-demo", str(error))
    return status


def _add_wallet_demo(subparsers: argparse._SubParsersAction[_Parser]) -> None:
    from server.wallet_demo_cli import add_wallet_demo_arguments

    parser = subparsers.add_parser(
        "wallet-demo",
        help="run the reference operator wallet (docs/wallet.md) on SQLite",
        description="The reference seamless wallet: serves POST /balance, /debit, /credit "
        "and /cancel from a SQLite file, idempotent by transaction id, every answer signed "
        "with the shared secret (docs/wallet.md). Runs until SIGINT or SIGTERM.",
    )
    add_wallet_demo_arguments(parser)
    parser.set_defaults(handler=_run_wallet_demo)


# --- entry point -----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="baccarat", description="Live Baccarat (Punto Banco) tools and server.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_coup(subparsers)
    _add_odds(subparsers)
    _add_roads(subparsers)
    _add_serve(subparsers)
    _add_token(subparsers)
    _add_bots(subparsers)
    _add_audit(subparsers)
    _add_verify(subparsers)
    _add_wallet_pending(subparsers)
    _add_wallet_demo(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed
        return exc.code if isinstance(exc.code, int) else USAGE_ERROR
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":
    raise SystemExit(main())
