"""Wallet fixtures: the reference wallet over real HTTP on loopback, and both engines.

The reference wallet (server/wallet/demo.py) runs in the test's event loop on port 0, mounted
under `/wallet` so every call goes to `http://127.0.0.1:PORT/wallet/{call}` (the URL with a
path, as operators give it). A middleware notes each request's path, headers, body and the
client's port, so tests can see what went on the wire and how many connections carried it.
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from server.store.memory import MemoryStore
from server.store.redis import RedisStore
from server.store.wallet import Wallet as StoreWallet
from server.wallet.base import Wallet
from server.wallet.demo import Book, Faults, start_wallet, wallet_app
from server.wallet.http_client import HttpWallet
from server.wallet.internal import InternalWallet
from tests.redis_server import delete_keys

START = 10_000  # every player's balance when a test begins, on every engine
SECRET = secrets.token_hex(32).encode()


@dataclass
class Seen:
    """One request as the wallet received it."""

    path: str
    headers: dict[str, str]
    body: bytes
    client_port: int


@dataclass
class DemoWallet:
    """The reference wallet under test: its URL, books, faults, and what it received."""

    url: str
    book: Book
    faults: Faults
    seen: list[Seen] = field(default_factory=list)

    def client_ports(self) -> set[int]:
        return {request.client_port for request in self.seen}


MakeDemo = Callable[..., Awaitable[DemoWallet]]


@pytest.fixture
async def make_demo(tmp_path: Path) -> AsyncIterator[MakeDemo]:
    """Start reference wallets (each with its own SQLite file) for the test."""
    runners: list[web.AppRunner] = []
    books: list[Book] = []

    async def make(
        secret: bytes = SECRET, initial_balance: int = START, faults: Faults | None = None
    ) -> DemoWallet:
        book = Book(tmp_path / f"wallet-{len(books)}.sqlite3", initial_balance)
        books.append(book)
        demo = DemoWallet("", book, faults or Faults())

        @web.middleware
        async def note(request: web.Request, handler: web.Handler) -> web.StreamResponse:
            body = await request.read()
            peer = request.transport.get_extra_info("peername") if request.transport else None
            port = peer[1] if peer else 0
            demo.seen.append(Seen(request.path, dict(request.headers), body, port))
            return await handler(request)

        root = web.Application(middlewares=[note])
        root.add_subapp("/wallet", wallet_app(book, secret, demo.faults))
        runner, port = await start_wallet(root)
        runners.append(runner)
        demo.url = f"http://127.0.0.1:{port}/wallet"
        return demo

    yield make
    for runner in runners:
        await runner.cleanup()
    for book in books:
        book.close()


@pytest.fixture
async def demo(make_demo: MakeDemo) -> DemoWallet:
    return await make_demo()


@pytest.fixture
async def http_wallets() -> AsyncIterator[list[HttpWallet]]:
    """HttpWallets made by a test, closed after it."""
    made: list[HttpWallet] = []
    yield made
    for wallet in made:
        await wallet.close()


@pytest.fixture
def client(demo: DemoWallet, http_wallets: list[HttpWallet]) -> Callable[..., HttpWallet]:
    """Make an HttpWallet of the demo wallet: `client(timeout=0.3, clock=...)`."""

    def make(**options: object) -> HttpWallet:
        settings: dict[str, object] = {"timeout": 2.0, **options}
        wallet = HttpWallet(demo.url, settings.pop("secret", SECRET), **settings)  # type: ignore[arg-type]
        http_wallets.append(wallet)
        return wallet

    return make


@dataclass
class Engine:
    """A wallet engine under the contract: the wallet, and how to give a player START."""

    name: str
    wallet: Wallet
    fund: Callable[[str], Awaitable[None]]


@pytest.fixture(
    params=["internal-memory", pytest.param("internal-redis", marks=pytest.mark.redis), "http"]
)
async def engine(request: pytest.FixtureRequest, make_demo: MakeDemo) -> AsyncIterator[Engine]:
    name: str = request.param
    if name == "http":
        demo = await make_demo()
        wallet = HttpWallet(demo.url, SECRET)

        async def nothing(player: str) -> None:
            """The reference wallet gives every new player START (--initial-balance)."""

        yield Engine(name, wallet, nothing)
        await wallet.close()
        return
    store: StoreWallet
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    url = ""
    if name == "internal-memory":
        store = MemoryStore(lambda: int(time.time() * 1000))
    else:
        url = request.getfixturevalue("redis_url")
        store = RedisStore.from_url(url, key_prefix=prefix)

    async def fund(player: str) -> None:
        await store.ensure_player(player, START)

    yield Engine(name, InternalWallet(store), fund)
    await store.close()  # type: ignore[attr-defined]
    if url:
        await delete_keys(url, [prefix])
