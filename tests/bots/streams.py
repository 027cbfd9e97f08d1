"""Build table event streams for the checker tests: real rounds from real cards."""

from __future__ import annotations

from typing import Any

from server.core.cards import parse_card
from server.core.coup import resolve_coup
from server.core.table import result_fields as core_result_fields

Message = dict[str, Any]
TABLE = "t1"


class Stream:
    """Events of one table with consecutive seqs, as the server would send them."""

    def __init__(self, seq: int = 0) -> None:
        self.seq = seq

    def event(self, round_no: int, kind: str, **fields: Any) -> Message:
        self.seq += 1
        return {
            "type": "event",
            "table": TABLE,
            "seq": self.seq,
            "round": round_no,
            "ts": 1_800_000_000_000 + self.seq,
            "kind": kind,
            **fields,
        }

    def round(self, round_no: int, cards: str, stakes: list[int] | None = None) -> list[Message]:
        """round_opened, bet_totals (with stakes), betting_closed, the cards, result, settled."""
        events = [self.event(round_no, "round_opened", closes_at=1, shoe=1, last_hand=False)]
        if stakes:
            totals = {"tie": sum(stakes)}
            events.append(
                self.event(round_no, "bet_totals", totals=totals, bettors=1, bets=len(stakes))
            )
        events.append(self.event(round_no, "betting_closed"))
        events += self.deal(round_no, cards)
        staked = sum(stakes or [])
        winner = events[-1]["winner"]
        bets = len(stakes or [])
        events.append(
            self.event(round_no, "round_settled", winner=winner, bets=bets, staked=staked, paid=0)
        )
        return events

    def deal(self, round_no: int, cards: str) -> list[Message]:
        """The card events of a coup and its round_result, as the table deals them."""
        coup = resolve_coup([parse_card(word) for word in cards.split()])
        events = [
            self.event(
                round_no,
                "card",
                hand=hand.value,
                index=index,
                rank=card.rank,
                suit=card.suit.value if card.suit else None,
            )
            for index, (hand, card) in enumerate(coup.deal_order)
        ]
        events.append(self.event(round_no, "round_result", **result_fields(cards)))
        return events


def result_fields(cards: str) -> dict[str, Any]:
    return core_result_fields(resolve_coup([parse_card(word) for word in cards.split()]))


BANKER_WINS = "Ks 6c Ks Ac 5s 2d"  # the protocol doc's round: Banker 7 beats Player 5
PLAYER_NATURAL = "8h 2c Ah 3d"  # Player 9 natural, Banker 5
TIE = "Kh Qd 7c 7s"  # 7 - 7, both stand
