"""The stream verifier: feed a table's events in order, read one verdict per shoe.

Pure (no clock, no I/O). For every table in the stream it runs

* the bots' round checker (server/bots/checker.py): seqs without gaps, each round's result
  (totals, winner, natural, pairs, hands) against its cards, the burn against its shown card,
  `round_settled` against the result and the stakes of the last `bet_totals`;
* per shoe (server/verify/shoes.py): the commitment, the seal's client seed against the
  entropy events, each card's position and Merkle proof, and at the reveal the seed against
  the commitment and every card shown against the recomputed shuffle;
* each round's total credit (`round_settled.paid`) against the paytable, and a void's refund
  against the stakes.

Messages other than table events are read only for a table's rules (`welcome`, `snapshot`)
and the events inside a `replay` answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import server.core.fair as fair
from server.bots.checker import ProblemKind, TableChecker
from server.core.bets import Paytable, Spot
from server.verify.fields import BadField, burn_cards, hex_bytes, int_field, shown_card, str_list
from server.verify.payouts import paid_range, paytable_of
from server.verify.shoes import Finding, ShoeRecord

__all__ = ["StreamVerifier", "TableRecord"]

Message = Mapping[str, Any]


@dataclass(slots=True)
class TableRecord:
    """One table's shoes and what was found outside any shoe."""

    table: str
    checker: TableChecker
    shoes: list[ShoeRecord] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)  # before the first shoe
    paytable: Paytable | None = None
    paytable_from: str = ""
    preset: object = None  # round_opened.rules: the preset the table's rules come from
    events: int = 0
    duplicates: int = 0

    @property
    def shoe(self) -> ShoeRecord | None:
        return self.shoes[-1] if self.shoes else None

    def find(self, finding: Finding) -> None:
        (self.shoe.findings if self.shoe is not None else self.findings).append(finding)


class StreamVerifier:
    """Feed messages in order with `feed`; `tables` holds the verdicts so far."""

    def __init__(self, paytable: Paytable | None = None) -> None:
        self.tables: dict[str, TableRecord] = {}
        self._paytable = paytable  # given by the caller (e.g. the server's welcome): wins

    def _table(self, table: str) -> TableRecord:
        record = self.tables.get(table)
        if record is None:
            record = self.tables[table] = TableRecord(table, TableChecker(table))
            if self._paytable is not None:
                record.paytable, record.paytable_from = self._paytable, "the server's rules"
        return record

    def feed_all(self, messages: Iterable[Message]) -> None:
        for message in messages:
            self.feed(message)

    def feed(self, message: Message) -> None:
        kind = message.get("type")
        if kind == "event" and isinstance(message.get("table"), str):
            self._event(self._table(message["table"]), message)
        elif kind == "replay" and isinstance(message.get("events"), list):
            self.feed_all(e for e in message["events"] if isinstance(e, Mapping))
        elif kind == "welcome" and isinstance(message.get("tables"), list):
            for rules in message["tables"]:
                if isinstance(rules, Mapping) and isinstance(rules.get("id"), str):
                    self._rules(rules["id"], rules)
        elif kind == "snapshot" and isinstance(message.get("table"), str):
            self._rules(message["table"], message.get("rules"))

    def _rules(self, table: str, rules: object) -> None:
        record = self._table(table)
        paytable = paytable_of(rules)
        if paytable is not None and self._paytable is None:
            record.paytable, record.paytable_from = paytable, "the table's rules"

    def _event(self, record: TableRecord, event: Message) -> None:
        problems = record.checker.on_event(event)
        if any(problem.kind is ProblemKind.DUPLICATE for problem in problems):
            record.duplicates += 1  # seen already (a replay overlapping a catch-up): skipped
            return
        record.events += 1
        round_no = event.get("round")
        for problem in problems:
            if problem.kind is ProblemKind.GAP:
                self._gap(record, problem.detail)
            else:
                record.find(Finding(problem.detail.removeprefix(f"round {round_no}: "), round_no))
        handler = _HANDLERS.get(str(event.get("kind")))
        if handler is None:
            return
        try:
            handler(self, record, event)
        except BadField as error:
            where = f"{event.get('kind')} event (seq {event.get('seq')})"
            record.find(Finding(f"{where}: {error}", event.get("round")))

    def _gap(self, record: TableRecord, detail: str) -> None:
        """Events are missing: the shoe they fall in cannot be vouched for."""
        shoe = record.shoe
        if shoe is not None and shoe.gap is None:
            shoe.gap = f"events missing from the input ({detail})"
        elif shoe is None:
            record.findings.append(Finding(f"events missing from the input ({detail})"))

    # --- the fair events --------------------------------------------------------------------
    def _committed(self, record: TableRecord, event: Message) -> None:
        commitment = hex_bytes(event, "commitment").hex()
        shoe = ShoeRecord(record.table, commitment, int_field(event, "round"))
        shoe.number = event["shoe"] if type(event.get("shoe")) is int else None
        record.shoes.append(shoe)
        if event.get("alg") != fair.ALG:
            shoe.find(
                f"shoe_committed alg {event.get('alg')!r}, not {fair.ALG!r}", shoe.first_round
            )

    def _shoe(self, record: TableRecord, event: Message) -> ShoeRecord:
        """The shoe an event belongs to; a shoe met without its commitment is not checked."""
        shoe = record.shoe
        number = event.get("shoe")
        if shoe is None or (type(number) is int and shoe.number not in (None, number)):
            shoe = ShoeRecord(record.table, None, int_field(event, "round"))
            record.shoes.append(shoe)
        if type(number) is int and shoe.number is None:
            shoe.number = number
        return shoe

    def _entropy(self, record: TableRecord, event: Message) -> None:
        value = event.get("value")
        if not isinstance(value, str):
            raise BadField(f"'value' is {value!r}, not a string")
        self._shoe(record, event).accept_entropy(value)

    def _sealed(self, record: TableRecord, event: Message) -> None:
        shoe = self._shoe(record, event)
        if event.get("alg") != fair.ALG:
            shoe.find(f"shoe_sealed alg {event.get('alg')!r}, not {fair.ALG!r}", event["round"])
        cut = event.get("cut_from_end")
        if not (isinstance(cut, list) and len(cut) == 2 and all(type(c) is int for c in cut)):
            raise BadField(f"'cut_from_end' is {cut!r}, not [lo, hi]")
        shoe.seal(
            event["round"],
            str_list(event, "entropy"),
            hex_bytes(event, "client_seed"),
            hex_bytes(event, "root"),
            decks=int_field(event, "decks"),
            cut_from_end=(cut[0], cut[1]),
        )

    def _shuffled(self, record: TableRecord, event: Message) -> None:
        shoe = self._shoe(record, event)
        shoe.cut_index = int_field(event, "cut_index")
        if shoe.sealed and event.get("cards") != 52 * shoe.decks:
            detail = f"shoe_shuffled has {event.get('cards')!r} cards, the seal {shoe.decks} decks"
            shoe.find(detail, event["round"])

    def _burn(self, record: TableRecord, event: Message) -> None:
        shoe = self._shoe(record, event)
        if not shoe.checked:
            shoe.rounds.add(event["round"])
            return  # no commitment to check its cards against
        cards = burn_cards(event)
        burned = event.get("burned")
        if burned != len(cards) - 1:
            detail = f"burn burns {burned!r} cards but shows {len(cards) - 1} with proofs"
            shoe.find(detail, event["round"], "burn")
        for index, card in enumerate(cards):
            where = "burn (shown card)" if index == 0 else f"burnt card {index}"
            shoe.show(card, event["round"], where)

    def _card(self, record: TableRecord, event: Message) -> None:
        shoe = self._shoe(record, event)
        if not shoe.checked:
            shoe.unchecked_cards += 1
            shoe.rounds.add(event["round"])
            return  # no commitment to check it against
        where = f"card {event.get('index')} ({event.get('hand')})"
        shoe.show(shown_card(event), event["round"], where)

    def _revealed(self, record: TableRecord, event: Message) -> None:
        """The shoe whose commitment the seed opens (a reveal may come after the next shoe's
        commitment); failing that the shoe of its number, or the latest."""
        seed = hex_bytes(event, "seed")
        digest, number = fair.commit(seed), event.get("shoe")
        waiting = [shoe for shoe in record.shoes if shoe.checked and not shoe.revealed]
        shoe = next((shoe for shoe in waiting if shoe.commitment == digest), None)
        if shoe is None and type(number) is int:
            shoe = next((shoe for shoe in reversed(record.shoes) if shoe.number == number), None)
        (shoe or self._shoe(record, event)).reveal(event["round"], seed)

    # --- money ------------------------------------------------------------------------------
    def _settled(self, record: TableRecord, event: Message) -> None:
        view = record.checker.view(event["round"])
        if view is None or view.coup is None or view.totals is None or not view.complete:
            return  # the round's cards or stakes were not all seen
        if record.paytable is None:
            record.paytable = paytable_of(record.preset)
            record.paytable_from = f"the {record.preset} preset's paytable"
        if record.paytable is None or not all(
            name in Spot._value2member_map_ for name in view.totals
        ):
            return
        bets = event["bets"] if type(event.get("bets")) is int else len(view.totals)
        allowed = paid_range(record.paytable, view.totals, bets, view.coup)
        if event.get("paid") not in allowed:
            span = str(allowed[0]) if len(allowed) == 1 else f"{allowed[0]}-{allowed[-1]}"
            paid, stakes = event.get("paid"), dict(view.totals)
            detail = f"round_settled paid {paid!r}, the rules pay {span} for the stakes {stakes}"
            record.find(Finding(detail, event["round"]))

    def _voided(self, record: TableRecord, event: Message) -> None:
        view = record.checker.view(event["round"])
        if view is None or view.totals is None or not view.complete:
            return
        staked = sum(view.totals.values())
        if event.get("refunded") != staked:
            detail = f"round_voided refunded {event.get('refunded')!r}, the stakes add to {staked}"
            record.find(Finding(detail, event["round"]))

    def _opened(self, record: TableRecord, event: Message) -> None:
        record.preset = event.get("rules")


_HANDLERS: dict[str, Callable[[StreamVerifier, TableRecord, Message], None]] = {
    "shoe_committed": StreamVerifier._committed,
    "entropy_accepted": StreamVerifier._entropy,
    "shoe_sealed": StreamVerifier._sealed,
    "shoe_shuffled": StreamVerifier._shuffled,
    "burn": StreamVerifier._burn,
    "card": StreamVerifier._card,
    "shoe_revealed": StreamVerifier._revealed,
    "round_settled": StreamVerifier._settled,
    "round_voided": StreamVerifier._voided,
    "round_opened": StreamVerifier._opened,
}
