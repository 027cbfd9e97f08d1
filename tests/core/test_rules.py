"""Table rules: the named presets, the default, lookup by name and validation."""

from __future__ import annotations

import pytest

from server.core.bets import Paytable, Spot
from server.core.rules import DEFAULT_PRESET, PRESETS, TableRules, rules_preset


def test_presets_exist() -> None:
    """The five named presets are offered, each keyed by its own name."""
    assert set(PRESETS) == {"classic8", "fourdeck", "punto6", "joggled6", "nocommission8"}
    for name, rules in PRESETS.items():
        assert rules.name == name
        assert rules.description


def test_preset_descriptions_speak_to_players() -> None:
    """The lobby shows each table's description: words for players, not the project's own
    ("Seed 000", "our default"), and what a Banker win pays."""
    for rules in PRESETS.values():
        text = rules.description
        assert text[0].isupper() and len(text) <= 100, text
        for internal in ("seed", "our default", "variant", "preset"):
            assert internal not in text.lower(), text
        assert "Banker pays" in text, text


def test_presets_have_a_title_for_players_beside_their_key() -> None:
    """Each preset has a name for players ("Classic Baccarat") apart from its key
    ("classic8"), which stays the rules' `name`; the wire map lists the title after it."""
    titles = [rules.title for rules in PRESETS.values()]
    assert PRESETS["classic8"].title == "Classic Baccarat"
    assert len(set(titles)) == len(titles)
    for name, rules in PRESETS.items():
        assert rules.title[0].isupper() and rules.title != name, rules.title
        assert "Baccarat" in rules.title or "Punto Banco" in rules.title, rules.title
        assert list(rules.to_dict())[:2] == ["name", "title"]
        assert rules.to_dict()["name"] == name


def test_default_is_classic8() -> None:
    """The default preset is classic8: 8 decks, cut card 7 from the end, Tie 8:1, 5%."""
    rules = rules_preset(DEFAULT_PRESET)
    assert DEFAULT_PRESET == "classic8"
    assert rules.decks == 8
    assert rules.cut_card_from_end == 7
    assert not rules.reshuffle_every_round
    assert rules.paytable.tie_pays == 8
    assert rules.paytable.banker_commission_bp == 500
    assert not rules.paytable.no_commission
    assert rules.paytable.pair_pays == 11


@pytest.mark.parametrize(
    ("name", "decks", "cut", "reshuffle", "no_commission"),
    [
        ("fourdeck", 4, 7, False, False),
        ("punto6", 6, 14, False, False),
        ("joggled6", 6, 7, True, False),
        ("nocommission8", 8, 7, False, True),
    ],
)
def test_preset_details(
    name: str, decks: int, cut: int, reshuffle: bool, no_commission: bool
) -> None:
    """Each seed's preset has its deck count, cut card, reshuffle rule and Banker payout."""
    rules = rules_preset(name)
    assert (rules.decks, rules.cut_card_from_end) == (decks, cut)
    assert rules.reshuffle_every_round is reshuffle
    assert rules.paytable.no_commission is no_commission
    assert rules.paytable.tie_pays == 8


def test_unknown_preset_names_the_choices() -> None:
    """rules_preset raises ValueError naming the unknown preset and every valid one."""
    with pytest.raises(ValueError) as raised:
        rules_preset("macao")
    message = str(raised.value)
    assert "macao" in message
    for name in PRESETS:
        assert name in message


@pytest.mark.parametrize("decks", [0, 9, -1])
def test_decks_outside_1_to_8_raise(decks: int) -> None:
    """TableRules accepts 1-8 decks only."""
    with pytest.raises(ValueError, match="decks"):
        TableRules("bad", decks=decks)


@pytest.mark.parametrize("decks", [1, 8])
def test_decks_bounds_accepted(decks: int) -> None:
    """One and eight decks are valid."""
    assert TableRules("ok", decks=decks).decks == decks


@pytest.mark.parametrize(("decks", "cut"), [(1, -1), (1, 27), (8, 209)])
def test_cut_card_outside_the_shoe_raises(decks: int, cut: int) -> None:
    """The cut card must lie in the back half of the shoe (0 to 26 cards per deck)."""
    with pytest.raises(ValueError, match="cut card"):
        TableRules("bad", decks=decks, cut_card_from_end=cut)


def test_to_dict_lists_rules_and_limits() -> None:
    """to_dict is a flat wire form of the rules with per-spot [min, max] limits."""
    data = TableRules("x", decks=2, paytable=Paytable(tie_pays=9)).to_dict()
    assert data["name"] == "x" and data["decks"] == 2 and data["tie_pays"] == 9
    assert data["banker_commission_bp"] == 500
    limits = data["limits"]
    assert isinstance(limits, dict)
    assert set(limits) == {spot.value for spot in Spot}
    assert limits["player"] == [100, 500_000]
