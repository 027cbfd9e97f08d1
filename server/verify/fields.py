"""Reading the fairness fields of table events (docs/fairness.md, "Events"), strictly.

Every field a check needs is read here; anything missing or malformed raises BadField with a
sentence naming it, which the verifier reports as a mismatch (a server that publishes a card
without a usable proof has not proved the card).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from server.bots.checker import card_from_map
from server.core.cards import Card
from server.core.fair import ProofStep, decode_proof

__all__ = [
    "BadField",
    "ShownCard",
    "burn_cards",
    "card_of",
    "hex_bytes",
    "int_field",
    "shown_card",
    "str_list",
]

Message = Mapping[str, Any]


class BadField(ValueError):
    """A field a check needs is missing or malformed."""


@dataclass(frozen=True, slots=True)
class ShownCard:
    """One card shown with its proof: a dealt card, the burn's shown card or a burnt card."""

    position: int
    card: Card
    salt: bytes
    path: tuple[ProofStep, ...]


def int_field(message: Message, name: str) -> int:
    value = message.get(name)
    if type(value) is not int:
        raise BadField(f"{name!r} is {value!r}, not an integer")
    return value


def hex_bytes(message: Message, name: str, size: int = 32) -> bytes:
    """A field of `size` bytes written as lower- or upper-case hex."""
    value = message.get(name)
    try:
        raw = bytes.fromhex(value) if isinstance(value, str) else None
    except ValueError:
        raw = None
    if raw is None or len(raw) != size:
        raise BadField(f"{name!r} is {value!r}, not {size} bytes of hex")
    return raw


def str_list(message: Message, name: str) -> list[str]:
    value = message.get(name)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise BadField(f"{name!r} is {value!r}, not a list of strings")
    return list(value)


def card_of(message: Message) -> Card:
    """The card of a `card` event or of a shown/burnt card's map: `rank` and `suit`."""
    card = card_from_map(message)
    if card is None or card.suit is None:
        raise BadField(f"not a card: rank {message.get('rank')!r}, suit {message.get('suit')!r}")
    return card


def shown_card(message: Message) -> ShownCard:
    """A card with its `position`, `salt` (hex) and `proof` (wire steps): its `rank` and
    `suit` beside them (a `card` event, the burn's shown card) or in a `card` map (a burnt
    card of the `burn` event's `burnt` list)."""
    nested = message.get("card")
    card = card_of(nested if isinstance(nested, Mapping) else message)
    position = int_field(message, "position")
    salt = hex_bytes(message, "salt")
    try:
        path = decode_proof(message.get("proof"))
    except ValueError as error:
        raise BadField(f"'proof' of position {position}: {error}") from None
    return ShownCard(position, card, salt, path)


def burn_cards(event: Message) -> list[ShownCard]:
    """Every card a `burn` event shows, in shoe order: the shown card, then the burnt ones.

    The shown card's proof fields may sit in `shown` or beside it in the event; the burnt
    cards are the maps carrying a `position` in the event's list fields (whatever the list is
    named), in the order listed (the verifier checks that the positions follow one another).
    """
    shown = event.get("shown")
    if not isinstance(shown, Mapping):
        raise BadField(f"'shown' is {shown!r}, not a card")
    if "position" not in shown:
        shown = {**shown, **{key: event.get(key) for key in ("position", "salt", "proof")}}
    cards = [shown_card(shown)]
    for value in event.values():
        if isinstance(value, list) and _card_maps(value):
            cards += [shown_card(item) for item in value]
    return cards


def _card_maps(items: Sequence[object]) -> bool:
    return bool(items) and all(isinstance(item, Mapping) and "position" in item for item in items)
