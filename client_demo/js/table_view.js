// One table: countdown, cards, result, spots and chips, settlement, scoreboard, recall.

import { h, setAttr, setText } from "./dom.js";
import { landedCards, syncCards } from "./cards.js";
import { FairPanel, markCards } from "./fair_view.js";
import {
  SPOTS,
  handTotal,
  limitText,
  money,
  payoutText,
  phaseLabel,
  rulesSummary,
  seconds,
  signedMoney,
  spotLabel,
  tableTitle,
  winnerLabel,
} from "./format.js";
import { renderRoads, scoreboard } from "./roads.js";
import { RecallPanel } from "./recall.js";
import { sumBySpot } from "./table_state.js";

export const CHIPS = [100, 500, 1000, 5000, 25000, 100000];

const UNCONFIRMED_WARNING_MS = 3000;

const KEY_SPOTS = { p: "player", b: "banker", t: "tie", P: "player_pair", B: "banker_pair" };

export class TableView {
  constructor(app, tableId) {
    this.app = app;
    this.tableId = tableId;
    this.built = false;
    this.chip = null;
    this.el = h(
      "section",
      { class: "table-view", "data-table": tableId },
      h("p", { class: "lobby-empty", text: `Opening table ${tableId}…` }),
    );
    this.onKey = (event) => this.key(event);
    document.addEventListener("keydown", this.onKey);
  }

  destroy() {
    document.removeEventListener("keydown", this.onKey);
    this.recall?.destroy();
  }

  get st() {
    return this.app.tables.get(this.tableId);
  }

  update(change = {}) {
    const st = this.st;
    if (!st) {
      if (this.app.welcomes > 0) {
        this.el.replaceChildren(
          h("h2", { text: `No table “${this.tableId}” here` }),
          h("p", {}, h("a", { href: "#/" }, "Back to the lobby")),
        );
        this.built = false;
      }
      return;
    }
    if (!this.built) this.build(st);
    if (change.kind === "table" && change.table !== this.tableId) return;
    this.recall.update(change);
    this.fill(st, change);
  }

  build(st) {
    this.built = true;
    const rules = st.rules;
    const spots = SPOTS.filter((spot) => rules.limits?.[spot]);
    const chips = CHIPS.filter((c) => c <= Math.max(...spots.map((s) => rules.limits[s][1])));
    this.chip = this.chip ?? chips[Math.min(2, chips.length - 1)];
    const p = (this.parts = {});
    p.phase = h("span", { class: "phase-pill", "data-testid": "phase", "aria-live": "polite" });
    p.countdown = h("span", { class: "countdown", "data-testid": "countdown", "aria-live": "off" });
    p.round = h("span", { class: "round-info" });
    p.note = h("p", { class: "table-note", "aria-live": "polite" });
    p.playerCards = h("div", { class: "hand-cards", "data-hand": "player" });
    p.bankerCards = h("div", { class: "hand-cards", "data-hand": "banker" });
    p.playerTotal = h("span", { class: "hand-total", "data-testid": "player-total" });
    p.bankerTotal = h("span", { class: "hand-total", "data-testid": "banker-total" });
    p.result = h("div", { class: "result", "data-testid": "result", role: "status", "aria-live": "polite" });
    p.settlement = h("div", { class: "settlement", "data-testid": "settlement", role: "status", "aria-live": "polite" });
    p.spots = new Map();
    const spotButtons = spots.map((spot) => {
      const parts = {
        mine: h("span", { class: "spot-mine" }),
        total: h("span", { class: "spot-total", "data-testid": `total-${spot}` }),
      };
      const el = h(
        "button",
        {
          type: "button",
          class: `spot spot-${spot}`,
          "data-testid": `spot-${spot}`,
          "data-spot": spot,
          onclick: () => this.placeChip(spot),
        },
        h("span", { class: "spot-name", text: spotLabel(spot) }),
        h("span", { class: "spot-pays", text: payoutText(spot, rules) }),
        h("span", { class: "spot-limits", text: limitText(rules.limits[spot]) }),
        parts.mine,
        parts.total,
      );
      p.spots.set(spot, { el, ...parts });
      return el;
    });
    p.chips = new Map();
    const chipBar = h(
      "div",
      { class: "chips", role: "radiogroup", "aria-label": "Chip value" },
      chips.map((amount, i) => {
        const el = h(
          "button",
          {
            type: "button",
            class: `chip chip-${i}`,
            role: "radio",
            "data-testid": `chip-${amount}`,
            "data-amount": amount,
            title: `Chip ${money(amount)} (key ${i + 1})`,
            onclick: () => this.selectChip(amount),
          },
          chipLabel(amount),
        );
        p.chips.set(amount, el);
        return el;
      }),
    );
    const action = (testid, text, fn, title) =>
      h("button", { type: "button", class: `action action-${testid}`, "data-testid": testid, title, onclick: fn }, text);
    p.undo = action("undo", "Undo", () => this.undo(), "Take back the last chips (U)");
    p.rebet = action("rebet", "Rebet", () => this.rebet(), "Place last round's bets again (R)");
    p.double = action("double", "Double", () => this.double(), "Double your bets (D)");
    p.confirm = action("confirm", "Confirm", () => this.confirm(), "Send the bets (Enter)");
    p.pendingInfo = h("span", { class: "pending-info" });
    p.unconfirmed = h("p", { class: "unconfirmed", "data-testid": "unconfirmed", role: "alert", hidden: true });
    // A spectator sees the layout with every player's totals, without chips or actions.
    p.controls = h(
      "div",
      { class: "bet-controls" },
      chipBar,
      p.unconfirmed,
      h("div", { class: "actions" }, p.undo, p.rebet, p.double, p.pendingInfo, p.confirm),
      h(
        "p",
        { class: "keys-hint" },
        "Keys: 1–6 chip · P Player · B Banker · T Tie · Shift+P / Shift+B pairs · U undo · R rebet · D double · Enter confirm · Esc lobby",
      ),
    );
    p.betting = h("div", { class: "betting" }, h("div", { class: "spots" }, spotButtons), p.controls);
    p.spectating = h(
      "p",
      { class: "spectating" },
      "You are watching this table as a spectator: bets are off.",
    );
    p.scoreboard = scoreboard();
    this.fair = new FairPanel(this.app, this.tableId);
    this.recall = new RecallPanel(this.app, this.tableId);
    this.el.replaceChildren(
      h(
        "header",
        { class: "table-head" },
        h("a", { class: "back", href: "#/", title: "Back to the lobby (Esc)" }, "← Lobby"),
        h("h2", { id: "table-title", tabindex: "-1", "data-table": st.id, text: tableTitle(st.id, rules) }),
        tableTitle(st.id, rules) !== st.id ? h("span", { class: "table-id", text: st.id }) : null,
        p.round,
        p.phase,
        p.countdown,
        h("p", {
          class: "table-rules",
          "data-testid": "table-rules",
          text: [rules.description, rulesSummary(rules)].filter(Boolean).join(" — "),
        }),
      ),
      h(
        "div",
        { class: "table-main" },
        h(
          "div",
          { class: "felt" },
          h(
            "div",
            { class: "hands" },
            h("div", { class: "hand hand-player" }, h("h3", {}, "Player ", p.playerTotal), p.playerCards),
            h("div", { class: "hand hand-banker" }, h("h3", {}, "Banker ", p.bankerTotal), p.bankerCards),
          ),
          p.result,
          this.fair.el,
          p.note,
          p.spectating,
          p.betting,
          p.settlement,
        ),
        h("div", { class: "side" }, p.scoreboard, this.recall.el),
      ),
    );
    this.recall.update({ kind: "welcome" });
  }

  fill(st, change) {
    const { app } = this;
    const p = this.parts;
    this.fillPhase(st);
    setText(p.round, st.round ? `Round ${st.round} · shoe ${st.shoe}${st.lastHand ? " · last hand" : ""}` : "");
    setText(p.note, st.note);
    const landed = () => this.fillTotals();
    syncCards(p.playerCards, st.handCards("player"), "card", landed);
    syncCards(p.bankerCards, st.handCards("banker"), "card", landed);
    markCards(p.playerCards, st.handCards("player"), st.fair);
    markCards(p.bankerCards, st.handCards("banker"), st.fair);
    this.fair.fill(st);
    this.fillTotals();
    this.fillResult(st);
    this.fillSettlement(st);
    this.fillSpots(st);
    p.spectating.hidden = !app.isSpectator;
    p.controls.hidden = app.isSpectator;
    p.betting.classList.toggle("watching", app.isSpectator);
    renderRoads(p.scoreboard, st.roads); // redraws only when the server's roads changed
    if (change.what === "settlement") this.recall.refresh();
    this.tick();
  }

  // While disconnected the table says so: not "Place your bets" with a countdown that means
  // nothing until the server is back.
  fillPhase(st) {
    const p = this.parts;
    const offline = this.app.connState !== "open";
    const text = offline
      ? `Disconnected: ${this.app.connState === "refused" ? "refused by the server" : "reconnecting…"}`
      : phaseLabel(st.phase);
    setText(p.phase, text);
    setAttr(p.phase, "data-phase", offline ? "offline" : st.phase);
  }

  // A hand's total counts only the cards that have appeared (a card being dealt is not yet).
  fillTotals() {
    const p = this.parts;
    const st = this.st;
    if (!st || !this.built) return;
    for (const [hand, el, box] of [
      ["player", p.playerTotal, p.playerCards],
      ["banker", p.bankerTotal, p.bankerCards],
    ]) {
      const cards = landedCards(box);
      setText(el, st.cards.length && cards.length ? handTotal(cards) : "");
    }
  }

  fillResult(st) {
    const p = this.parts;
    const r = st.result;
    if (!r) {
      setAttr(p.result, "data-winner", null);
      setText(p.result, st.phase === "betting" ? "" : st.cards.length ? "Dealing…" : "");
      p.result.className = "result";
      return;
    }
    if (r.voided) {
      setAttr(p.result, "data-winner", "void");
      setText(p.result, `Round voided: ${r.reason}. Every stake is refunded.`);
      p.result.className = "result voided";
      return;
    }
    const extras = [];
    if (r.natural) extras.push("Natural");
    if (r.player_pair) extras.push("Player pair");
    if (r.banker_pair) extras.push("Banker pair");
    const head = r.winner === "tie" ? `Tie ${r.player_total} – ${r.banker_total}` : `${winnerLabel(r.winner)} wins ${Math.max(r.player_total, r.banker_total)} – ${Math.min(r.player_total, r.banker_total)}`;
    setText(p.result, [head, ...extras].join(" · "));
    setAttr(p.result, "data-winner", r.winner);
    setAttr(p.result, "data-natural", r.natural ? "true" : "false");
    p.result.className = `result win-${r.winner}`;
  }

  fillSettlement(st) {
    const p = this.parts;
    const s = st.settlement;
    if (!s) {
      setText(p.settlement, "");
      setAttr(p.settlement, "data-credit", null);
      setAttr(p.settlement, "data-round", null);
      p.settlement.hidden = true;
      return;
    }
    p.settlement.hidden = false;
    const verdict = s.net > 0 ? `You won ${money(s.net)}` : s.net < 0 ? `You lost ${money(-s.net)}` : "You broke even";
    const lines = s.payouts.map(
      (x) => `${spotLabel(x.spot)} ${money(x.amount)}: ${x.outcome}${x.credit ? `, back ${money(x.credit)}` : ""}`,
    );
    const text = `Round ${s.round}: ${verdict} (staked ${money(s.staked)}, paid back ${money(s.credit)}). Balance ${money(s.balance)}.`;
    if (p.settlement.dataset.key !== `${s.table}:${s.round}:${s.credit}`) {
      p.settlement.dataset.key = `${s.table}:${s.round}:${s.credit}`;
      p.settlement.replaceChildren(
        h("strong", { text }),
        h("ul", {}, lines.map((line) => h("li", { text: line }))),
      );
      p.settlement.className = `settlement ${s.net > 0 ? "won" : s.net < 0 ? "lost" : "even"}`;
    }
    setAttr(p.settlement, "data-credit", s.credit);
    setAttr(p.settlement, "data-net", s.net);
    setAttr(p.settlement, "data-round", s.round);
  }

  fillSpots(st) {
    const p = this.parts;
    const mine = st.myStakes();
    const pending = st.pendingStakes();
    const open = this.bettingOpen(st);
    for (const [spot, parts] of p.spots) {
      const stake = mine[spot] || 0;
      const extra = pending[spot] || 0;
      const bits = [];
      if (stake) bits.push(`yours ${money(stake)}`);
      if (extra) bits.push(`+${money(extra)} to confirm`);
      setText(parts.mine, bits.join(" "));
      setAttr(parts.el, "data-mine", stake);
      setAttr(parts.el, "data-pending", extra);
      const total = st.totals[spot] || 0;
      setText(parts.total, total ? `all ${money(total)}` : "");
      setAttr(parts.total, "data-value", total);
      parts.el.classList.toggle("has-pending", extra > 0);
      parts.el.classList.toggle("has-mine", stake > 0);
      const won = st.result && !st.result.voided && spotWon(spot, st.result);
      parts.el.classList.toggle("won", Boolean(won));
      parts.el.disabled = this.app.isSpectator;
      parts.el.setAttribute("aria-label", `${spotLabel(spot)}, pays ${payoutText(spot, st.rules)}, limits ${limitText(st.rules.limits[spot])}${bits.length ? `, ${bits.join(", ")}` : ""}`);
    }
    for (const [amount, el] of p.chips) {
      setAttr(el, "aria-checked", amount === this.chip ? "true" : "false");
      el.classList.toggle("selected", amount === this.chip);
    }
    const pendingTotal = st.pendingTotal();
    setText(p.pendingInfo, pendingTotal ? `${money(pendingTotal)} to confirm` : "");
    p.confirm.disabled = !pendingTotal || !open;
    p.undo.disabled = !st.pending.length;
    p.rebet.disabled = !st.rebetBets().length;
    p.double.disabled = !pendingTotal && !(open && Object.keys(mine).length);
    p.betting.classList.toggle("closed", !open);
  }

  tick() {
    const st = this.st;
    if (!st || !this.built) return;
    const p = this.parts;
    const offline = this.app.connState !== "open";
    const left = offline ? 0 : this.app.timeLeft(st);
    const text = offline ? "paused" : st.phase === "betting" ? seconds(left) : "";
    setText(p.countdown, text);
    setAttr(p.countdown, "data-ms", Math.round(left));
    p.countdown.classList.toggle("urgent", !offline && st.phase === "betting" && left < 3000);
    const open = this.bettingOpen(st);
    if (p.betting.classList.contains("closed") === open) this.fillSpots(st);
    // The last seconds of betting with chips still to confirm: they will not be placed.
    const unsent = open && left < UNCONFIRMED_WARNING_MS ? st.pending.filter((g) => g.round === st.round).flat() : [];
    p.unconfirmed.hidden = !unsent.length;
    if (unsent.length) {
      const what = sumBySpot(unsent).map((b) => `${spotLabel(b.spot)} ${money(b.amount)}`).join(", ");
      setText(p.unconfirmed, `Your chips are not confirmed (${what}): press Confirm within ${seconds(left)}, or they are not placed.`);
    }
  }

  bettingOpen(st) {
    return this.app.connState === "open" && st.phase === "betting" && this.app.timeLeft(st) > 0;
  }

  // --- betting ------------------------------------------------------------------------------
  selectChip(amount) {
    this.chip = amount;
    if (this.st) this.fillSpots(this.st);
  }

  // Client-side checks mirror the server's (docs/protocol.md, "Limits"): a spot's limits
  // apply to this player's total on it this round; the balance must cover what is sent.
  problems(st, additions) {
    const out = [];
    // Chips placed while betting is closed are for the next round: nothing on it yet.
    const mine = this.bettingOpen(st) ? st.myStakes() : {};
    const pending = st.pendingStakes();
    let adding = 0;
    for (const { spot, amount } of additions) {
      adding += amount;
      const limit = st.rules.limits?.[spot];
      if (!limit) {
        out.push(`${spotLabel(spot)} is not offered at this table.`);
        continue;
      }
      const total = (mine[spot] || 0) + (pending[spot] || 0) + amount;
      if (total > limit[1]) {
        out.push(`${spotLabel(spot)} maximum is ${money(limit[1])}; you would have ${money(total)} on it.`);
      }
    }
    const balance = this.app.balance ?? 0;
    if (st.pendingTotal() + adding > balance) out.push(`Not enough balance: you have ${money(balance)}.`);
    return out;
  }

  addPending(group) {
    const st = this.st;
    if (!st) return false;
    if (!this.app.canBet) {
      this.app.notice(this.app.isSpectator ? "Spectators cannot bet." : "Not connected yet.");
      return false;
    }
    const problems = this.problems(st, group);
    if (problems.length) {
      this.app.notice(problems.join(" "));
      return false;
    }
    // Chips placed while betting is open are for this round (dropped, and said so, if not
    // confirmed when it closes: App.expirePending); placed while it is closed, for the next.
    group.round = this.bettingOpen(st) ? st.round : null;
    st.pending.push(group);
    this.fillSpots(st);
    this.tick();
    return true;
  }

  placeChip(spot) {
    if (this.chip === null) {
      this.app.notice("Pick a chip first.");
      return;
    }
    this.addPending([{ spot, amount: this.chip }]);
  }

  undo() {
    const st = this.st;
    if (!st || !st.pending.length) return;
    st.pending.pop();
    this.fillSpots(st);
  }

  rebet() {
    const st = this.st;
    if (!st) return;
    const bets = st.rebetBets();
    if (!bets.length) {
      this.app.notice("No earlier bets to repeat.", "info");
      return;
    }
    this.addPending(bets.map((b) => ({ ...b })));
  }

  double() {
    const st = this.st;
    if (!st) return;
    const mine = this.bettingOpen(st) ? st.myStakes() : {}; // a finished round's are not doubled
    const pending = st.pendingStakes();
    const spots = new Set([...Object.keys(mine), ...Object.keys(pending)]);
    const group = [...spots].map((spot) => ({ spot, amount: (mine[spot] || 0) + (pending[spot] || 0) }));
    if (!group.length) {
      this.app.notice("Nothing to double yet.", "info");
      return;
    }
    this.addPending(group);
  }

  confirm() {
    const st = this.st;
    const { app } = this;
    if (!st) return;
    if (!app.canBet) {
      app.notice(app.isSpectator ? "Spectators cannot bet." : "Not connected yet.");
      return;
    }
    const bets = sumBySpot(st.pending.flat());
    if (!bets.length) {
      app.notice("Pick a chip and a spot first.", "info");
      return;
    }
    if (!app.conn.isOpen) {
      app.notice("Not connected: your bets were not sent. They stay on the table.");
      return;
    }
    if (!this.bettingOpen(st)) {
      app.notice("Betting is closed for this round; your chips stay for the next one.", "info");
      return;
    }
    const mine = st.myStakes();
    const under = bets.filter(({ spot, amount }) => (mine[spot] || 0) + amount < st.rules.limits[spot][0]);
    if (under.length) {
      app.notice(under.map(({ spot }) => `${spotLabel(spot)} minimum is ${money(st.rules.limits[spot][0])}.`).join(" "));
      return;
    }
    const total = bets.reduce((sum, b) => sum + b.amount, 0);
    if (total > (app.balance ?? 0)) {
      app.notice(`Not enough balance: you have ${money(app.balance ?? 0)}.`);
      return;
    }
    st.pending = [];
    app.placeBets(st, bets);
  }

  key(event) {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey) return;
    const target = event.target;
    if (target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement || target instanceof HTMLSelectElement) return;
    if (document.querySelector("dialog[open]")) return;
    const { key } = event;
    if (key === "Escape") {
      location.hash = "#/";
      return;
    }
    if (!this.built || this.app.isSpectator) return;
    const chips = [...this.parts.chips.keys()];
    if (/^[1-9]$/.test(key) && chips[Number(key) - 1] !== undefined) {
      this.selectChip(chips[Number(key) - 1]);
    } else if (KEY_SPOTS[key] && this.parts.spots.has(KEY_SPOTS[key])) {
      this.placeChip(KEY_SPOTS[key]);
    } else if (key === "u" || key === "U" || key === "Backspace") {
      this.undo();
    } else if (key === "r" || key === "R") {
      this.rebet();
    } else if (key === "d" || key === "D") {
      this.double();
    } else if (key === "Enter" && !(target instanceof HTMLButtonElement || target instanceof HTMLAnchorElement)) {
      this.confirm();
    } else {
      return;
    }
    event.preventDefault();
  }
}

function chipLabel(amount) {
  const units = amount / 100;
  return units >= 1000 ? `${units / 1000}K` : String(units);
}

function spotWon(spot, result) {
  if (spot === "player_pair") return result.player_pair;
  if (spot === "banker_pair") return result.banker_pair;
  return result.winner === spot;
}
