// What the page knows about one table, built only from the server's snapshot and events.
//
// Sequence numbers: `seq` is the last event (or snapshot) applied. Events at or below it are
// duplicates and ignored; an event beyond seq + 1 is a gap, which the caller repairs with a
// `join` carrying `since`. Nothing here talks to the network.

import { FairTracker } from "./fairness.js";
import { handTotal } from "./format.js";

export const EMPTY_ROADS = Object.freeze({
  bead_plate: [],
  big_road: [],
  big_eye_boy: [],
  small_road: [],
  cockroach_pig: [],
});

const LOG_LIMIT = 4000;

export class TableState {
  constructor(id, rules) {
    this.id = id;
    this.rules = rules;
    this.seq = null;
    this.epoch = null;
    this.joined = false;
    this.phase = "idle";
    this.round = 0;
    this.closesAt = 0;
    this.shoe = 0;
    this.lastHand = false;
    this.cards = []; // {hand, rank, suit, index, shoe, position}
    this.fair = new FairTracker(); // the committed shoes and each card's proof (fairness.js)
    this.result = null; // the round_result event, or {voided: true, reason}
    this.settled = null; // the round_settled event
    this.results = "";
    this.roads = EMPTY_ROADS;
    this.totals = {}; // spot -> minor units, every player's stakes this round
    this.bettors = 0;
    this.betCount = 0;
    this.bettorIds = new Set(); // only from bet_placed (older servers)
    this.myBets = []; // {bet_id, round, spot, amount, status: "sent" | "accepted"}
    this.lastRoundBets = []; // {spot, amount}: what "rebet" places
    this.pending = []; // groups of {spot, amount}: chips placed, not sent yet; undo pops a group
    this.settlement = null; // {round, credit, staked, net, payouts, balance}
    this.note = "";
    this.log = []; // for tests and debugging: what was applied, in order
    this.duplicates = 0;
    this.gaps = 0;
  }

  record(entry) {
    this.log.push(entry);
    if (this.log.length > LOG_LIMIT) this.log.splice(0, this.log.length - LOG_LIMIT);
  }

  applySnapshot(msg) {
    this.seq = msg.seq;
    if (msg.epoch !== undefined) this.epoch = msg.epoch;
    if (msg.rules) this.rules = { ...this.rules, ...msg.rules };
    const newRound = msg.round !== this.round;
    if (newRound) {
      this.rememberBets();
      this.settled = null;
      this.totals = {};
      this.bettors = 0;
      this.betCount = 0;
      this.bettorIds = new Set();
    }
    this.phase = msg.phase;
    this.round = msg.round;
    this.closesAt = msg.closes_at;
    this.shoe = msg.shoe;
    this.lastHand = Boolean(msg.last_hand);
    this.fair.applySnapshot(msg.fair, msg.cards || []);
    const proofs = msg.fair?.proofs || [];
    const cards = (msg.cards || []).map((card, index) => ({
      ...card,
      index,
      shoe: msg.fair?.shoe,
      position: proofs[index]?.position,
    }));
    // Keep the cards already shown (same round, same deal) so they are not dealt twice.
    if (newRound || !sameCards(this.cards, cards)) this.cards = cards;
    if (msg.phase === "betting" || msg.phase === "idle" || newRound) this.result = null;
    if (this.result === null && msg.phase === "settled") {
      this.result = resultFromCards(this.cards, msg.round);
    } else if (msg.phase === "voided") {
      this.result = { voided: true, reason: "the round was voided", round: msg.round };
    }
    this.results = msg.results || "";
    this.roads = msg.roads || EMPTY_ROADS;
    if (msg.totals) this.totals = { ...msg.totals };
    if (typeof msg.bettors === "number") this.bettors = msg.bettors;
    const known = new Set((msg.bets || []).map((b) => b.bet_id));
    const stillSent = this.myBets.filter(
      (b) => b.status === "sent" && b.round === msg.round && !known.has(b.bet_id),
    );
    this.myBets = (msg.bets || [])
      .map((b) => ({ ...b, round: msg.round, status: "accepted" }))
      .concat(stillSent);
    this.record({ snapshot: msg.seq, recovered: msg.recovered, phase: msg.phase, cards: cards.length });
  }

  // Returns "ok", "duplicate" or "gap"; only "ok" events change the state.
  applyEvent(ev) {
    if (this.seq === null) return "gap"; // no snapshot yet: nothing to apply it to
    if (ev.seq <= this.seq) {
      this.duplicates += 1;
      this.record({ dup: ev.seq });
      return "duplicate";
    }
    if (ev.seq > this.seq + 1) {
      this.gaps += 1;
      this.record({ gap: ev.seq, after: this.seq });
      return "gap";
    }
    this.seq = ev.seq;
    this.record({ seq: ev.seq, kind: ev.kind, round: ev.round });
    this.apply(ev);
    return "ok";
  }

  // The state change of one event (also used by the replay player, which has no seq rules).
  apply(ev) {
    this.fair.apply(ev);
    switch (ev.kind) {
      case "shoe_shuffled":
        this.shoe = ev.shoe;
        this.results = "";
        this.roads = EMPTY_ROADS;
        this.lastHand = false;
        this.note = `New shoe #${ev.shoe}: ${ev.decks} decks shuffled`;
        break;
      case "burn":
        this.note = `Burn card ${ev.shown?.rank ?? ""}${ev.shown?.suit ?? ""} shown, ${ev.burned} burned`;
        break;
      case "cut_card":
        if (ev.last_round === ev.round) this.lastHand = true;
        this.note =
          ev.last_round === ev.round
            ? "The cut card is out: this is the last hand of the shoe"
            : "The cut card is out: one more hand after this one";
        break;
      case "round_opened":
        this.rememberBets();
        this.round = ev.round;
        this.phase = "betting";
        this.closesAt = ev.closes_at;
        this.lastHand = Boolean(ev.last_hand) || this.lastHand;
        this.cards = [];
        this.result = null;
        this.settled = null;
        this.totals = {};
        this.bettors = 0;
        this.betCount = 0;
        this.bettorIds = new Set();
        this.myBets = this.myBets.filter((b) => b.round === ev.round);
        if (!this.note.startsWith("The cut card")) this.note = "";
        break;
      case "bet_placed":
        this.totals = { ...this.totals, [ev.spot]: (this.totals[ev.spot] || 0) + ev.amount };
        this.bettorIds.add(ev.player);
        this.bettors = this.bettorIds.size;
        this.betCount += 1;
        break;
      case "bet_totals":
        this.totals = { ...(ev.totals || {}) };
        if (typeof ev.bettors === "number") this.bettors = ev.bettors;
        if (typeof ev.bets === "number") this.betCount = ev.bets;
        break;
      case "betting_closed":
        this.phase = "dealing";
        break;
      case "card":
        this.phase = "dealing";
        this.cards = [
          ...this.cards,
          {
            hand: ev.hand,
            rank: ev.rank,
            suit: ev.suit,
            index: ev.index,
            shoe: this.fair.current?.shoe,
            position: ev.position,
          },
        ].sort((a, b) => a.index - b.index);
        break;
      case "round_result":
        this.result = ev;
        break;
      case "round_settled":
        this.phase = "settled";
        this.settled = ev;
        break;
      case "round_voided":
        this.phase = "voided";
        this.result = { voided: true, reason: ev.reason, round: ev.round };
        this.settled = ev;
        break;
      default:
        break; // a kind this page does not know yet: keep the seq, show nothing
    }
  }

  // At a new round, this round's accepted bets become what "rebet" repeats.
  rememberBets() {
    const accepted = this.myBets.filter((b) => b.status === "accepted");
    if (accepted.length) this.lastRoundBets = sumBySpot(accepted);
  }

  // What "rebet" repeats: this round's bets once it is over, else the last round's.
  rebetBets() {
    const done = this.phase !== "betting" && this.phase !== "idle";
    const now = this.myBets.filter((b) => b.status === "accepted" && b.round === this.round);
    return done && now.length ? sumBySpot(now) : this.lastRoundBets;
  }

  handCards(hand) {
    return this.cards.filter((c) => c.hand === hand);
  }

  handTotal(hand) {
    if (this.result && !this.result.voided) return this.result[`${hand}_total`];
    return handTotal(this.handCards(hand));
  }

  // This player's stake on each spot this round (sent or accepted).
  myStakes() {
    const out = {};
    for (const b of this.myBets) if (b.round === this.round) out[b.spot] = (out[b.spot] || 0) + b.amount;
    return out;
  }

  pendingStakes() {
    return sumBySpotMap(this.pending.flat());
  }

  pendingTotal() {
    return this.pending.flat().reduce((sum, b) => sum + b.amount, 0);
  }
}

export function sumBySpot(bets) {
  const map = sumBySpotMap(bets);
  return Object.entries(map).map(([spot, amount]) => ({ spot, amount }));
}

function sumBySpotMap(bets) {
  const out = {};
  for (const b of bets) out[b.spot] = (out[b.spot] || 0) + b.amount;
  return out;
}

function sameCards(a, b) {
  return (
    a.length === b.length &&
    a.every((c, i) => c.hand === b[i].hand && c.rank === b[i].rank && c.suit === b[i].suit)
  );
}

// A settled round seen only through a snapshot (no round_result event): what its cards say.
export function resultFromCards(cards, round) {
  const player = cards.filter((c) => c.hand === "player");
  const banker = cards.filter((c) => c.hand === "banker");
  if (player.length < 2 || banker.length < 2) return null;
  const p = handTotal(player);
  const b = handTotal(banker);
  const two = (hand) => handTotal(hand.slice(0, 2));
  return {
    round,
    winner: p > b ? "player" : b > p ? "banker" : "tie",
    player_total: p,
    banker_total: b,
    natural: two(player) >= 8 || two(banker) >= 8,
    player_pair: player[0].rank === player[1].rank,
    banker_pair: banker[0].rank === banker[1].rank,
  };
}
