"""`baccarat verify` (issue 18): check a table's committed shoes, card by card, from its events.

- fields: reading the fairness fields of events (position, salt, proof, ...), strictly;
- shoes: one shoe's commitment, seal, cards and reveal (on server.core.fair);
- payouts: what a round's total payout may be for its published stakes;
- stream: the stream verifier, per table and per shoe, with the bots' round checker;
- report: one line per shoe and the exit status;
- inputs, remote, command: reading a file or a running server, and the command itself.

A client of the server, like the bots: the pure parts (fields, shoes, payouts, stream,
report) use the core and the bots' pure round checker, and nothing of the server.
"""

from server.verify.report import MISMATCH, NOTHING, OK, USAGE, report
from server.verify.stream import StreamVerifier

__all__ = ["MISMATCH", "NOTHING", "OK", "USAGE", "StreamVerifier", "report"]
