"""Bots: WebSocket clients that load a site and check every round they see with the game core.

A client of the server, not part of it: it may import server.core and server.wire only
(tests/test_architecture.py keeps it so), and nothing in the server imports it.
"""
