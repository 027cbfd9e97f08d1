"""The verdict: one line per shoe, a summary per table, and the exit status.

Exit statuses (also in `baccarat verify --help`): 0 every shoe seen checks out; 1 a mismatch,
or events missing inside the input; 2 bad usage or unreadable input (the command's, not
here); 3 nothing to check (no shoe with its commitment in the input).
"""

from __future__ import annotations

from server.verify.shoes import ShoeRecord
from server.verify.stream import StreamVerifier, TableRecord

__all__ = ["MISMATCH", "NOTHING", "OK", "USAGE", "report"]

OK, MISMATCH, USAGE, NOTHING = 0, 1, 2, 3
MAX_EXTRA = 20  # further findings listed under a shoe's line


def _head(shoe: ShoeRecord) -> str:
    name = f"shoe {shoe.number}" if shoe.number is not None else "a shoe"
    return f"{name} (table {shoe.table})"


def _counts(shoe: ShoeRecord) -> str:
    cards, rounds = len(shoe.shown) + shoe.unchecked_cards, len(shoe.rounds)
    return f"{cards} card{'s' * (cards != 1)}, {rounds} round{'s' * (rounds != 1)}"


def _verdict(shoe: ShoeRecord) -> str:
    if shoe.findings:
        return f"MISMATCH: {shoe.findings[0].describe()}"
    if shoe.gap is not None:
        return f"INCOMPLETE: {shoe.gap}; not vouched for"
    if not shoe.checked:
        return (
            f"not checked: its shoe_committed is not in the input "
            f"(the input starts inside it, at round {shoe.first_round})"
        )
    if shoe.revealed and not shoe.sealed:
        return "ok, revealed before its seal: the seed matches the commitment"
    if shoe.recomputed:
        return "ok, revealed and recomputed"
    if shoe.sealed:
        return f"ok: {len(shoe.shown)} cards checked against the root, not revealed yet"
    return "ok so far: committed, not sealed yet"


def shoe_lines(shoe: ShoeRecord) -> list[str]:
    lines = [f"{_head(shoe)}: {_counts(shoe)}: {_verdict(shoe)}"]
    extra = shoe.findings[1:]
    lines += [f"  also: {finding.describe()}" for finding in extra[:MAX_EXTRA]]
    if len(extra) > MAX_EXTRA:
        lines.append(f"  and {len(extra) - MAX_EXTRA} more")
    return lines


def _summary(record: TableRecord) -> str:
    shoes = record.shoes
    recomputed = sum(shoe.recomputed and not shoe.findings for shoe in shoes)
    open_ = sum(shoe.checked and not shoe.revealed for shoe in shoes)
    unchecked = sum(not shoe.checked for shoe in shoes)
    checker = record.checker
    money = f"; payouts against {record.paytable_from}" if record.paytable is not None else ""
    return (
        f"table {record.table}: {record.events} events, {len(shoes)} shoe{'s' * (len(shoes) != 1)} "
        f"({recomputed} recomputed, {open_} not revealed yet, {unchecked} not checked), "
        f"{checker.checked} round results checked{money}"
    )


def report(verifier: StreamVerifier) -> tuple[list[str], int]:
    """Lines for stdout and the exit status."""
    lines: list[str] = []
    failed = False
    checked = False
    for record in verifier.tables.values():
        if not record.events:
            continue  # named in a welcome, no event of it in the input
        for finding in record.findings:
            lines.append(f"table {record.table}: MISMATCH: {finding.describe()}")
            failed = True
        for shoe in record.shoes:
            lines += shoe_lines(shoe)
            failed = failed or bool(shoe.findings) or shoe.gap is not None
            checked = checked or shoe.checked
        lines.append(_summary(record))
    if failed:
        return lines, MISMATCH
    if not checked:
        lines.append(
            "nothing to check: no shoe_committed in the input (no bac-shoe-v1 shoe: "
            "a server from before issue 18, or a stream that starts inside a shoe)"
        )
        return lines, NOTHING
    return lines, OK
