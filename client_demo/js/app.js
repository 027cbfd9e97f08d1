// The page's model and its conversation with the server: who we are, every table's state,
// bets in flight, history and replay requests. Views subscribe and redraw; nothing here
// touches the DOM.

import { Connection } from "./connection.js";
import { TableState, sumBySpot } from "./table_state.js";
import { money, spotLabel } from "./format.js";

const TOKEN_KEY = "baccarat.token";
const NOTICE_MS = 9000;

export class App {
  constructor(location, storage) {
    const params = new URLSearchParams(location.search);
    this.location = location;
    this.storage = storage;
    this.urlToken = params.get("token") || null;
    this.askedRole = params.get("role") || null;
    this.tokenRefused = false;
    // The server's last plain-HTTP answer to /ws when the socket would not open:
    // {status, reason, token} (token: whether one was offered), or null.
    this.refusal = null;
    this.guestRefusal = null; // why the saved guest token was refused, until the new welcome
    this.guestsAllowed = null; // from /lobby, or false once a token-less page was refused
    this.tables = new Map(); // id -> TableState
    this.tableOrder = [];
    this.player = null;
    this.role = null;
    this.name = null;
    this.balance = null;
    this.node = null;
    this.encoding = null;
    this.welcomes = 0;
    this.connState = "connecting";
    this.connDetail = {};
    this.notices = [];
    this.noticeCount = 0;
    this.listeners = new Set();
    this.refCount = 0;
    this.refs = new Map(); // ref -> {kind, table, round}
    this.history = { status: "idle", rounds: [], message: "", table: null };
    this.replay = null; // the last replay answer {table, round, events} or error
    this.sessionRounds = []; // rounds this page saw end: {table, round, winner, settlement}
    this.snapshotOffsetMs = null;
    this.conn = new Connection({
      url: () => this.wsUrl(),
      onMessage: (m) => this.onMessage(m),
      onState: (state, detail) => this.onConnState(state, detail),
      check: () => this.checkServer(),
    });
  }

  start() {
    this.conn.start();
  }

  // --- listeners ------------------------------------------------------------------------
  subscribe(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  emit(change) {
    for (const fn of [...this.listeners]) fn(change);
  }

  // A notice about one table (`table`) is shown only on that table's page (main.js), and
  // is dropped at a reconnect unless it is about money (level "error").
  notice(text, level = "error", table = null) {
    const id = ++this.noticeCount;
    this.notices = [...this.notices.slice(-3), { id, text, level, table }];
    this.emit({ kind: "notice" });
    setTimeout(() => {
      this.notices = this.notices.filter((n) => n.id !== id);
      this.emit({ kind: "notice" });
    }, NOTICE_MS);
  }

  // --- identity ---------------------------------------------------------------------------
  get isSpectator() {
    if (this.role) return this.role === "spectator";
    return this.askedRole === "spectator";
  }

  get canBet() {
    return !this.isSpectator && this.player !== null;
  }

  storedToken() {
    try {
      return this.storage.getItem(TOKEN_KEY);
    } catch {
      return null; // storage may be disabled (private mode, file://)
    }
  }

  tokenForSocket() {
    if (this.urlToken) return this.urlToken;
    if (this.askedRole === "spectator" || this.tokenRefused) return null;
    return this.storedToken();
  }

  wsUrl() {
    const proto = this.location.protocol === "https:" ? "wss:" : "ws:";
    const query = new URLSearchParams();
    const token = this.tokenForSocket();
    if (token) query.set("token", token);
    if (this.askedRole) query.set("role", this.askedRole);
    const tail = query.toString();
    return `${proto}//${this.location.host}/ws${tail ? `?${tail}` : ""}`;
  }

  // The socket did not open, and the browser does not say why. Ask the same URL over plain
  // HTTP (docs/protocol.md, "Handshake refusals"): no answer means the server is down (keep
  // trying); 426 means it would take this WebSocket (try again); a 401 says why the token, or
  // the lack of one, was refused. A refused saved token is forgotten and the page comes back
  // at once without it (a new guest where guests are allowed); a refusal nothing on the page
  // can mend (no token, or the address's or a pasted one) stops and asks for a token.
  async checkServer() {
    const token = this.tokenForSocket();
    let response;
    let reason = "";
    try {
      response = await fetch(this.wsUrl().replace(/^ws/, "http"), { cache: "no-store" });
      reason = (await response.text()).trim().split("\n")[0].slice(0, 200);
    } catch {
      this.refusal = null;
      return "backoff"; // the server is down: keep trying
    }
    if (response.status === 426) {
      this.refusal = null;
      return "backoff"; // it would upgrade: the next attempt should work
    }
    this.refusal = { status: response.status, reason: reason || `HTTP ${response.status}`, token: Boolean(token) };
    if (response.status !== 401) return "backoff"; // 429, 403, 503: said in the header, retried
    if (token && token !== this.urlToken && token === this.storedToken()) {
      this.tokenRefused = true;
      try {
        this.storage.removeItem(TOKEN_KEY);
      } catch {
        // nothing stored after all
      }
      this.guestRefusal = { reason: this.refusal.reason, guest: tokenClaims(token).guest === true };
      this.refusal = null;
      return "now";
    }
    if (!token) this.guestsAllowed = false;
    if (this.guestRefusal) {
      // The saved token went, and a token-less page is refused too: say both.
      this.refusal.reason = `${this.guestRefusal.reason}; then, without it: ${this.refusal.reason}`;
      this.guestRefusal = null;
    }
    this.emit({ kind: "connection" });
    return "stop";
  }

  // A token pasted into the refusal form: kept like a guest token (a refresh keeps it) and
  // tried at once.
  useToken(token) {
    const value = token.trim();
    if (!value) return;
    if (this.urlToken) this.urlToken = value;
    else {
      try {
        this.storage.setItem(TOKEN_KEY, value);
      } catch {
        this.urlToken = value; // no storage: keep it for this page
      }
    }
    this.tokenRefused = false;
    this.guestRefusal = null;
    this.refusal = null;
    this.conn.restart();
  }

  // --- connection ---------------------------------------------------------------------------
  onConnState(state, detail) {
    const wasOpen = this.connState === "open";
    this.connState = state;
    this.connDetail = detail;
    if (state === "open") this.refusal = null;
    if (wasOpen && state !== "open") {
      // Notices about tables other than the one in view are of no use after a reconnect.
      this.notices = this.notices.filter((n) => !n.table || n.level === "error");
    }
    if (state !== "open") {
      for (const st of this.tables.values()) {
        st.joined = false;
        st.joinPending = false;
        for (const bet of st.myBets) if (bet.status === "sent") bet.unconfirmed = true;
      }
      this.refs.clear();
      if (this.history.status === "loading") this.history = { ...this.history, status: "idle" };
    }
    this.emit({ kind: "connection" });
  }

  serverNow() {
    const offset = this.conn.offsetMs ?? this.snapshotOffsetMs ?? 0;
    return Date.now() + offset;
  }

  timeLeft(st) {
    if (!st || st.phase !== "betting") return 0;
    return Math.max(0, st.closesAt - this.serverNow());
  }

  nextRef(kind, extra = {}) {
    this.refCount += 1;
    const ref = `${kind[0]}${this.refCount}`;
    this.refs.set(ref, { kind, ...extra });
    if (this.refs.size > 200) this.refs.delete(this.refs.keys().next().value); // unanswered = fine
    return ref;
  }

  send(message) {
    return this.conn.send(message);
  }

  // --- tables -------------------------------------------------------------------------------
  join(tableId, { resume = false, nodeChanged = false } = {}) {
    const st = this.tables.get(tableId);
    if (!st) return;
    const message = { type: "join", table: tableId, ref: this.nextRef("join", { table: tableId }) };
    // `since` keeps the stream gapless across reconnects. Without an epoch to prove it is the
    // same history, a different node after a reconnect may be a restarted in-memory server:
    // start over from a snapshot then (docs/protocol.md, "Sequence numbers and reconnecting").
    if (resume && st.seq !== null && (st.epoch !== null || !nodeChanged)) {
      message.since = st.seq;
      if (st.epoch !== null) message.epoch = st.epoch;
    }
    st.joined = false;
    st.joinPending = true;
    this.send(message);
  }

  // The roads are the server's: after each result, a fresh join brings a snapshot with them.
  refreshRoads(st) {
    if (st.joined) {
      st.wantRoads = false;
      this.join(st.id);
    } else {
      st.wantRoads = true;
    }
  }

  onMessage(msg) {
    switch (msg.type) {
      case "welcome":
        return this.onWelcome(msg);
      case "snapshot":
        return this.onSnapshot(msg);
      case "joined":
        return this.onJoined(msg);
      case "event":
        return this.onEvent(msg);
      case "bet_accepted":
        return this.onBetAccepted(msg);
      case "bet_rejected":
        return this.onBetRejected(msg);
      case "settlement":
        return this.onSettlement(msg);
      case "history":
        return this.onHistory(msg);
      case "replay":
        return this.onReplay(msg);
      case "error":
        return this.onError(msg);
      default:
        return undefined; // pong, left, and anything newer than this page
    }
  }

  onWelcome(msg) {
    this.welcomes += 1;
    const nodeChanged = this.node !== null && msg.node !== this.node;
    const newPlayer = this.player !== null && msg.player !== this.player;
    this.node = msg.node;
    this.player = msg.player ?? null;
    this.role = msg.role ?? null;
    this.name = msg.name ?? null;
    this.balance = typeof msg.balance === "number" ? msg.balance : null;
    this.encoding = msg.encoding;
    if (msg.token && !this.urlToken && this.askedRole !== "spectator") {
      try {
        this.storage.setItem(TOKEN_KEY, msg.token);
      } catch {
        // no storage: a refresh will be a new guest
      }
      this.tokenRefused = false;
    }
    if (this.guestRefusal && msg.token) {
      const { reason, guest } = this.guestRefusal;
      const what = guest
        ? "your guest identity is no longer valid on this server: you are a new guest"
        : "your saved token is no longer valid on this server: you are a new guest";
      this.notice(`The server refused the saved token (${reason}): ${what} (${msg.player}), with a new balance.`, "info");
    } else if (newPlayer) {
      this.notice(
        `Reconnected as a new guest (${msg.player}): this server does not keep players across connections.`,
        "info",
      );
    }
    this.guestRefusal = null;
    if (msg.token) this.guestsAllowed = true; // we are a guest: guests are allowed here
    const ids = (msg.tables || []).map((t) => t.id);
    for (const rules of msg.tables || []) {
      const st = this.tables.get(rules.id);
      if (st) st.rules = { ...rules };
      else this.tables.set(rules.id, this.newTable(rules));
    }
    for (const id of [...this.tables.keys()]) if (!ids.includes(id)) this.tables.delete(id);
    this.tableOrder = ids;
    for (const st of this.tables.values()) {
      if (newPlayer) st.myBets = [];
      this.join(st.id, { resume: true, nodeChanged });
    }
    this.conn.markReady();
    this.emit({ kind: "welcome" });
  }

  newTable(rules) {
    const st = new TableState(rules.id, { ...rules });
    // A card's proof is checked asynchronously (WebCrypto): redraw when its mark changes.
    st.fair.onChange = () => this.emit({ kind: "table", table: st.id, what: "fair" });
    return st;
  }

  // "Verify this shoe": recompute the table's last revealed shoe in the page (fairness.js).
  verifyShoe(tableId) {
    const st = this.tables.get(tableId);
    return st ? st.fair.verify() : Promise.resolve(null);
  }

  onSnapshot(msg) {
    const st = this.tables.get(msg.table);
    if (!st) return;
    st.applySnapshot(msg);
    if (msg.recovered === false) {
      this.notice(`Table ${st.id}: the events missed while away are no longer held; the table was reloaded.`, "info", st.id);
    }
    if (typeof msg.balance === "number") this.balance = msg.balance;
    if (msg.phase === "betting" && typeof msg.time_left_ms === "number" && msg.time_left_ms > 0) {
      this.snapshotOffsetMs = msg.closes_at - msg.time_left_ms - Date.now();
    }
    this.expirePending(st);
    this.emit({ kind: "table", table: st.id, what: "snapshot" });
  }

  onJoined(msg) {
    const st = this.tables.get(msg.table);
    if (!st) return;
    st.joined = true;
    st.joinPending = false;
    if (msg.epoch !== undefined) st.epoch = msg.epoch;
    st.record({ joined: msg.seq });
    this.resendUnconfirmed(st);
    if (st.wantRoads) this.refreshRoads(st);
    this.emit({ kind: "table", table: st.id, what: "joined" });
  }

  onEvent(ev) {
    const st = this.tables.get(ev.table);
    if (!st) return;
    const outcome = st.applyEvent(ev);
    if (outcome === "gap") {
      // A jump in seq: ask again from the last one we have (unless that is under way).
      if (st.seq !== null && !st.joinPending) this.join(st.id, { resume: true });
      return;
    }
    if (outcome !== "ok") return;
    this.expirePending(st);
    if (ev.kind === "round_result") this.refreshRoads(st);
    if (ev.kind === "round_result" || ev.kind === "round_voided") this.rememberRound(st, ev);
    this.emit({ kind: "table", table: st.id, what: ev.kind, event: ev });
  }

  rememberRound(st, ev) {
    const known = this.sessionRounds.find((r) => r.table === st.id && r.round === ev.round);
    if (known) {
      known.winner = ev.winner ?? "voided";
      return;
    }
    this.sessionRounds = [
      { table: st.id, round: ev.round, winner: ev.winner ?? "voided", settlement: null },
      ...this.sessionRounds,
    ].slice(0, 50);
  }

  // --- bets ---------------------------------------------------------------------------------
  // Chips on the layout for a round whose betting has closed were never sent: say plainly
  // which, and take them off. Chips placed while betting was closed (round null) wait for the
  // next round and belong to it once it opens.
  expirePending(st) {
    if (!st.pending.length) return;
    const open = st.phase === "betting" && this.timeLeft(st) > 0;
    const lost = [];
    st.pending = st.pending.filter((group) => {
      if (group.round === null || group.round === undefined) {
        if (open) group.round = st.round;
        return true;
      }
      if (group.round === st.round && st.phase === "betting") return true;
      lost.push(group);
      return false;
    });
    if (!lost.length) return;
    const rounds = [...new Set(lost.map((g) => g.round))].join(", ");
    const what = sumBySpot(lost.flat())
      .map((b) => `${spotLabel(b.spot)} ${money(b.amount)}`)
      .join(", ");
    this.notice(
      `Table ${st.id}, round ${rounds}: no more bets before you confirmed, so these chips were not placed: ${what}. Nothing was taken from your balance.`,
      "error",
      st.id,
    );
  }

  placeBets(st, bets) {
    for (const { spot, amount } of bets) {
      const bet = { bet_id: newBetId(), round: st.round, spot, amount, status: "sent" };
      st.myBets.push(bet);
      this.sendBet(st, bet);
    }
    this.emit({ kind: "table", table: st.id, what: "bets" });
  }

  sendBet(st, bet) {
    bet.unconfirmed = false;
    this.send({
      type: "bet",
      table: st.id,
      round: bet.round,
      bet_id: bet.bet_id,
      spot: bet.spot,
      amount: bet.amount,
    });
  }

  // Bets sent just before a drop got no answer. Send them again with the same bet_id (a
  // retry can never debit twice) while their round is open; otherwise say so.
  resendUnconfirmed(st) {
    const lost = [];
    for (const bet of st.myBets) {
      if (!bet.unconfirmed) continue;
      if (st.phase === "betting" && bet.round === st.round) this.sendBet(st, bet);
      else lost.push(bet);
    }
    if (!lost.length) return;
    st.myBets = st.myBets.filter((b) => !lost.includes(b));
    const what = lost.map((b) => `${spotLabel(b.spot)} ${money(b.amount)}`).join(", ");
    this.notice(`Table ${st.id}: not confirmed before the connection dropped: ${what}. Check your balance.`, "error", st.id);
  }

  onBetAccepted(msg) {
    const st = this.tables.get(msg.table);
    if (st) {
      const bet = st.myBets.find((b) => b.bet_id === msg.bet_id);
      if (bet) Object.assign(bet, { status: "accepted", round: msg.round, unconfirmed: false });
      else if (msg.round === st.round) {
        st.myBets.push({ bet_id: msg.bet_id, round: msg.round, spot: msg.spot, amount: msg.amount, status: "accepted" });
      }
    }
    if (typeof msg.balance === "number") this.balance = msg.balance;
    this.emit({ kind: "table", table: msg.table, what: "bet_accepted" });
  }

  onBetRejected(msg) {
    const st = this.tables.get(msg.table);
    let what = "Bet";
    if (st) {
      const bet = st.myBets.find((b) => b.bet_id === msg.bet_id);
      if (bet) {
        what = `${spotLabel(bet.spot)} ${money(bet.amount)}`;
        st.myBets = st.myBets.filter((b) => b !== bet);
      }
    }
    this.notice(`${what} refused: ${msg.message} (${msg.code})`);
    this.emit({ kind: "table", table: msg.table, what: "bet_rejected" });
  }

  onSettlement(msg) {
    const payouts = msg.payouts || [];
    const credit = payouts.reduce((sum, p) => sum + p.credit, 0);
    const staked = payouts.reduce((sum, p) => sum + p.amount, 0);
    const settlement = {
      table: msg.table,
      round: msg.round,
      payouts,
      credit,
      staked,
      net: credit - staked,
      balance: msg.balance,
    };
    const st = this.tables.get(msg.table);
    if (st) st.settlement = settlement;
    if (typeof msg.balance === "number") this.balance = msg.balance;
    const known = this.sessionRounds.find((r) => r.table === msg.table && r.round === msg.round);
    if (known) known.settlement = settlement;
    else {
      this.sessionRounds = [
        { table: msg.table, round: msg.round, winner: null, settlement },
        ...this.sessionRounds,
      ].slice(0, 50);
    }
    this.emit({ kind: "table", table: msg.table, what: "settlement" });
  }

  // --- recall -------------------------------------------------------------------------------
  requestHistory(tableId) {
    if (this.history.status === "unsupported") return;
    const ref = this.nextRef("history", { table: tableId });
    const sent = this.send({ type: "history", table: tableId, limit: 20, ref });
    this.history = { ...this.history, status: sent ? "loading" : this.history.status, table: tableId };
    this.emit({ kind: "history" });
  }

  onHistory(msg) {
    this.history = { status: "ok", rounds: msg.rounds || [], message: "", table: msg.table ?? this.history.table };
    this.emit({ kind: "history" });
  }

  requestReplay(tableId, round) {
    const ref = this.nextRef("replay", { table: tableId, round });
    if (!this.send({ type: "replay", table: tableId, round, ref })) {
      this.notice("Not connected: the replay was not requested.");
    }
  }

  onReplay(msg) {
    this.replay = { table: msg.table, round: msg.round, events: msg.events || [] };
    this.emit({ kind: "replay" });
  }

  onError(msg) {
    const request = msg.ref !== undefined ? this.refs.get(msg.ref) : undefined;
    if (request) this.refs.delete(msg.ref);
    const kind = request?.kind;
    if (kind === "history") {
      const unsupported = msg.code === "UNKNOWN_TYPE";
      this.history = {
        ...this.history,
        status: unsupported ? "unsupported" : "error",
        message: `${msg.message} (${msg.code})`,
      };
      this.emit({ kind: "history" });
      return;
    }
    if (kind === "replay") {
      this.notice(`Round ${request.round} cannot be replayed: ${msg.message} (${msg.code})`);
      return;
    }
    if (kind === "join") {
      const st = this.tables.get(request.table);
      if (st) st.joinPending = false;
      if (msg.code === "UNAVAILABLE" && st) {
        setTimeout(() => this.join(st.id, { resume: true }), 1000);
      }
      this.notice(`Table ${request.table}: ${msg.message} (${msg.code})`);
      return;
    }
    this.notice(`${msg.message} (${msg.code})`);
  }
}

// A bet_id unique per player and table: random, from crypto.getRandomValues (which, unlike
// crypto.randomUUID, also exists on plain-http pages served to other machines).
export function newBetId() {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

// The claims of a JWT, unchecked (the server checks): only to word a refusal.
export function tokenClaims(token) {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(part + "=".repeat((4 - (part.length % 4)) % 4)));
  } catch {
    return {};
  }
}
