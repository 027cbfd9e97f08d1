"""The operator's wallet (docs/wallet.md): one interface, two engines.

- protocol.py: the seamless-wallet API on the wire (calls, bodies, statuses, transaction ids,
  signatures); pure, no I/O.
- base.py: the `Wallet` interface, its transactions and results.
- internal.py: the internal wallet, over the store's own balances.
- http_client.py: the HTTP wallet, the client of an operator's wallet.
- faults.py: the faults the reference wallet injects for tests (it waits in wall-clock time).
- demo.py: the reference wallet (`baccarat wallet-demo`), SQLite behind the same API, with
  faults to inject for tests.

This package imports nothing but the core, so the store may use its data types; only
internal.py looks at the store, and only at its wallet interface (server/store/wallet.py).
"""
