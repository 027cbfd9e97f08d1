"""Table rules and the named presets, one per seed document, plus our default.

See shared/reference/baccarat.md: 8 decks, cut card 7 from the end, reshuffle at the cut
card, Tie 8:1, Banker 5% commission, pairs 11:1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from server.core.bets import Paytable, TableLimits

__all__ = ["DEFAULT_PRESET", "PRESETS", "TableRules", "rules_preset"]


@dataclass(frozen=True, slots=True)
class TableRules:
    """A table's rules. `name` is the rules' key (the preset's, e.g. "classic8": PRESETS,
    `round_opened.rules`); `title` and `description` are for players (the lobby, the table's
    header), set by the preset or per table in the tables file."""

    name: str
    decks: int = 8
    cut_card_from_end: int = 7  # cards left behind the cut card
    reshuffle_every_round: bool = False
    paytable: Paytable = field(default_factory=Paytable)
    limits: TableLimits = field(default_factory=TableLimits)
    description: str = ""
    title: str = ""  # the table's name for players, e.g. "Classic Baccarat"

    def __post_init__(self) -> None:
        if not 1 <= self.decks <= 8:
            raise ValueError(f"decks must be 1-8, got {self.decks}")
        if not 0 <= self.cut_card_from_end <= 52 * self.decks // 2:
            raise ValueError(f"cut card position {self.cut_card_from_end} is outside the shoe")

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "title": self.title,
            "decks": self.decks,
            "cut_card_from_end": self.cut_card_from_end,
            "reshuffle_every_round": self.reshuffle_every_round,
            "banker_commission_bp": self.paytable.banker_commission_bp,
            "no_commission": self.paytable.no_commission,
            "tie_pays": self.paytable.tie_pays,
            "pair_pays": self.paytable.pair_pays,
            "limits": {
                spot.value: [limit.minimum, limit.maximum]
                for spot, limit in self.limits.spots.items()
            },
            "description": self.description,
        }


PRESETS: dict[str, TableRules] = {
    rules.name: rules
    for rules in (
        TableRules(
            "classic8",
            title="Classic Baccarat",
            decks=8,
            cut_card_from_end=7,
            description="Classic Punto Banco, eight decks: Banker pays 0.95 to 1, Tie 8 to 1",
        ),
        TableRules(
            "fourdeck",
            title="Four-Deck Baccarat",
            decks=4,
            cut_card_from_end=7,
            description="A four-deck shoe, shuffled more often: Banker pays 0.95 to 1, Tie 8 to 1",
        ),
        TableRules(
            "punto6",
            title="Punto Banco, Six Decks",
            decks=6,
            cut_card_from_end=14,
            description="Six decks, cut card 14 cards from the back: Banker pays 0.95 to 1",
        ),
        TableRules(
            "joggled6",
            title="Fresh Shoe Baccarat",
            decks=6,
            reshuffle_every_round=True,
            description="Six decks shuffled before every hand: Banker pays 0.95 to 1",
        ),
        TableRules(
            "nocommission8",
            title="No Commission Baccarat",
            decks=8,
            paytable=Paytable(no_commission=True),
            description="No commission: Banker pays 1 to 1, or half when it wins with a 6",
        ),
    )
}
DEFAULT_PRESET = "classic8"


def rules_preset(name: str) -> TableRules:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown rules preset {name!r}; one of {', '.join(PRESETS)}") from None
