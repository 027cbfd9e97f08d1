// Recall: the player's last rounds (`history`) and a replay of any held round (`replay`),
// played back at the pace its events were recorded (their `ts`).

import { h, setText } from "./dom.js";
import { syncCards } from "./cards.js";
import { clockTime, money, parseCard, signedMoney, spotLabel, winnerLabel } from "./format.js";
import { TableState } from "./table_state.js";

const LONGEST_WAIT_MS = 5000; // a 15 s betting window replays as 5 s (said on screen)

export class RecallPanel {
  constructor(app, tableId) {
    this.app = app;
    this.tableId = tableId;
    this.asked = false;
    this.waitingReplay = null; // the round asked for from this panel
    this.status = h("p", { class: "history-status", "data-testid": "history-status", role: "status" });
    this.list = h("ol", { class: "history-list" });
    this.seen = h("ol", { class: "seen-list" });
    this.roundInput = h("input", {
      type: "number",
      min: "1",
      step: "1",
      inputmode: "numeric",
      id: `replay-round-${tableId}`,
      "data-testid": "replay-round",
      "aria-label": "Round number to replay",
    });
    const form = h(
      "form",
      {
        class: "replay-form",
        onsubmit: (event) => {
          event.preventDefault();
          const round = Number(this.roundInput.value);
          if (Number.isInteger(round) && round > 0) this.askReplay(round);
          else this.app.notice("Type a round number to replay.", "info");
        },
      },
      h("label", { for: `replay-round-${tableId}`, text: "Replay round" }),
      this.roundInput,
      h("button", { type: "submit", "data-testid": "replay-button", text: "Replay" }),
    );
    this.player = new ReplayPlayer();
    this.el = h(
      "section",
      { class: "recall", "data-testid": "history", "aria-label": "Your rounds and replays" },
      h("h3", { text: "Your last rounds" }),
      this.status,
      this.list,
      h("h3", { text: "Rounds on this page" }),
      this.seen,
      form,
      this.player.el,
    );
  }

  destroy() {
    this.player.stop();
  }

  refresh() {
    if (this.app.isSpectator) return;
    this.app.requestHistory(this.tableId);
  }

  askReplay(round) {
    this.waitingReplay = round;
    this.app.requestReplay(this.tableId, round);
  }

  update(change) {
    const { app } = this;
    if (!this.asked && app.connState === "open" && !app.isSpectator) {
      this.asked = true;
      app.requestHistory(this.tableId);
    }
    if (change.kind === "connection" && app.connState === "open" && app.history.status === "idle") {
      this.asked = false;
    }
    if (change.kind === "replay" && app.replay && app.replay.table === this.tableId && app.replay.round === this.waitingReplay) {
      this.waitingReplay = null;
      this.player.play(app.replay);
    }
    this.renderHistory();
    this.renderSeen();
  }

  renderHistory() {
    const { history } = this.app;
    if (this.app.isSpectator) {
      setText(this.status, "Spectators have no rounds of their own.");
      return;
    }
    this.status.dataset.state = history.status;
    if (history.status === "unsupported") {
      setText(this.status, `This server cannot recall rounds yet: it answered “${history.message}”. Replays below still work.`);
      return;
    }
    if (history.status === "error") {
      setText(this.status, `Your rounds could not be loaded: ${history.message}`);
      return;
    }
    if (history.status === "loading" && !history.rounds.length) {
      setText(this.status, "Loading your rounds…");
      return;
    }
    if (history.status !== "ok") return;
    const rounds = history.rounds.filter((r) => (r.table ?? this.tableId) === this.tableId);
    setText(this.status, rounds.length ? "" : "No rounds yet: your settled bets will appear here.");
    const key = JSON.stringify(rounds);
    if (this.list.dataset.key === key) return; // unchanged: keep the buttons (and the focus)
    this.list.dataset.key = key;
    this.list.replaceChildren(...rounds.map((r) => this.historyRow(r)));
  }

  historyRow(r) {
    const payouts = r.payouts || [];
    const bets = r.bets || payouts;
    const staked = bets.reduce((sum, b) => sum + (b.amount || 0), 0);
    const credit = payouts.reduce((sum, p) => sum + (p.credit || 0), 0);
    const winner = r.winner ?? r.result?.winner;
    const pt = r.totals?.player ?? r.player_total ?? r.result?.player_total;
    const bt = r.totals?.banker ?? r.banker_total ?? r.result?.banker_total;
    const parts = [`#${r.round}`];
    const when = r.ts ?? r.time ?? r.settled_at;
    if (when) parts.push(clockTime(when));
    if (winner) parts.push(`${winnerLabel(winner)}${pt !== undefined ? ` ${pt}–${bt}` : ""}`);
    const cards = roundCards(r);
    if (cards) parts.push(cards);
    if (bets.length) parts.push(`bets ${bets.map((b) => `${spotLabel(b.spot)} ${money(b.amount)}`).join(", ")}`);
    if (payouts.length) parts.push(`result ${signedMoney(credit - staked)}`);
    const after = r.balance_after ?? r.balance;
    if (typeof after === "number") parts.push(`balance ${money(after)}`);
    return h(
      "li",
      { "data-round": r.round, "data-testid": "history-round" },
      h("span", { text: parts.join(" · ") }),
      h("button", { type: "button", class: "link", onclick: () => this.askReplay(r.round) }, "Replay"),
    );
  }

  renderSeen() {
    const rounds = this.app.sessionRounds.filter((r) => r.table === this.tableId).slice(0, 12);
    const key = JSON.stringify(rounds.map((r) => [r.round, r.winner, r.settlement?.net]));
    if (this.seen.dataset.key === key) return;
    this.seen.dataset.key = key;
    this.seen.replaceChildren(
      ...rounds.map((r) =>
        h(
          "li",
          { "data-round": r.round },
          h(
            "span",
            {
              text: `#${r.round} · ${r.winner === "voided" ? "voided" : r.winner ? winnerLabel(r.winner) : "…"}${r.settlement ? ` · you ${signedMoney(r.settlement.net)}` : ""}`,
            },
          ),
          h("button", { type: "button", class: "link", "data-testid": `replay-${r.round}`, onclick: () => this.askReplay(r.round) }, "Replay"),
        ),
      ),
    );
    if (!this.roundInput.value && rounds.length) this.roundInput.placeholder = String(rounds[0].round);
  }
}

function roundCards(r) {
  if (Array.isArray(r.player) && Array.isArray(r.banker)) {
    return `P ${r.player.join(" ")} / B ${r.banker.join(" ")}`;
  }
  if (Array.isArray(r.cards) && r.cards.length) {
    const cards = r.cards.map((c) => (typeof c === "string" ? { ...parseCard(c), hand: "" } : c));
    return cards.map((c) => `${c.hand ? c.hand[0].toUpperCase() : ""}${c.rank}${c.suit}`).join(" ");
  }
  return "";
}

// Plays a round's events again into a small table of its own, waiting between two events as
// long as the server did (long waits shortened), faster on request.
export class ReplayPlayer {
  constructor() {
    this.timer = null;
    this.speed = 1;
    this.title = h("h4", { class: "replay-title" });
    this.playerCards = h("div", { class: "hand-cards", "data-hand": "player" });
    this.bankerCards = h("div", { class: "hand-cards", "data-hand": "banker" });
    this.playerTotal = h("span", { class: "hand-total", "data-testid": "replay-player-total" });
    this.bankerTotal = h("span", { class: "hand-total", "data-testid": "replay-banker-total" });
    this.result = h("p", { class: "result", "data-testid": "replay-result" });
    this.log = h("ol", { class: "replay-log" });
    this.progress = h("span", { class: "replay-progress" });
    const speed = h(
      "select",
      { "aria-label": "Replay speed", onchange: (e) => (this.speed = Number(e.target.value)) },
      [1, 2, 4].map((n) => h("option", { value: n, text: `${n}×` })),
    );
    this.el = h(
      "div",
      { class: "replay", "data-testid": "replay", hidden: true },
      this.title,
      h(
        "div",
        { class: "hands small" },
        h("div", { class: "hand hand-player" }, h("h5", {}, "Player ", this.playerTotal), this.playerCards),
        h("div", { class: "hand hand-banker" }, h("h5", {}, "Banker ", this.bankerTotal), this.bankerCards),
      ),
      this.result,
      h(
        "div",
        { class: "replay-controls" },
        this.progress,
        speed,
        h("button", { type: "button", onclick: () => this.skip(), text: "Next event" }),
        h("button", { type: "button", onclick: () => this.close(), text: "Close" }),
      ),
      h("p", { class: "keys-hint", text: `Waits longer than ${LONGEST_WAIT_MS / 1000} s are shortened.` }),
      this.log,
    );
  }

  play(replay) {
    this.stop();
    this.events = replay.events;
    this.index = 0;
    this.state = new TableState(replay.table, {});
    this.state.seq = 0;
    this.el.hidden = false;
    this.el.dataset.state = "playing";
    this.el.dataset.round = String(replay.round);
    setText(this.title, `Replay: table ${replay.table}, round ${replay.round}`);
    this.log.replaceChildren();
    this.render();
    this.step();
  }

  step() {
    this.timer = null;
    if (this.index >= this.events.length) {
      this.el.dataset.state = "done";
      setText(this.progress, `${this.events.length} events · done`);
      return;
    }
    const ev = this.events[this.index];
    this.state.apply(ev);
    this.log.append(h("li", { text: describe(ev) }));
    this.log.scrollTop = this.log.scrollHeight;
    this.index += 1;
    this.render();
    setText(this.progress, `${this.index}/${this.events.length}`);
    if (this.index < this.events.length) {
      const wait = Math.min(LONGEST_WAIT_MS, Math.max(0, this.events[this.index].ts - ev.ts)) / this.speed;
      this.timer = setTimeout(() => this.step(), wait);
    } else {
      this.step();
    }
  }

  skip() {
    if (this.timer === null) return;
    clearTimeout(this.timer);
    this.step();
  }

  stop() {
    clearTimeout(this.timer);
    this.timer = null;
  }

  close() {
    this.stop();
    this.el.hidden = true;
  }

  render() {
    const st = this.state;
    syncCards(this.playerCards, st.handCards("player"), "replay-card");
    syncCards(this.bankerCards, st.handCards("banker"), "replay-card");
    const dealt = st.cards.length > 0;
    setText(this.playerTotal, dealt ? st.handTotal("player") : "");
    setText(this.bankerTotal, dealt ? st.handTotal("banker") : "");
    const r = st.result;
    if (r && !r.voided) {
      this.result.dataset.winner = r.winner;
      setText(this.result, `${winnerLabel(r.winner)}${r.winner === "tie" ? "" : " wins"} ${r.player_total}–${r.banker_total}`);
    } else if (r && r.voided) {
      this.result.dataset.winner = "void";
      setText(this.result, `Voided: ${r.reason}`);
    } else {
      delete this.result.dataset.winner;
      setText(this.result, st.phase === "betting" ? "Betting…" : "");
    }
  }
}

function describe(ev) {
  switch (ev.kind) {
    case "round_opened":
      return `Betting opens (${((ev.closes_at - ev.ts) / 1000).toFixed(1)} s)`;
    case "betting_closed":
      return "No more bets";
    case "card":
      return `${winnerLabel(ev.hand)} card: ${ev.rank}${ev.suit}`;
    case "round_result":
      return `${winnerLabel(ev.winner)}${ev.winner === "tie" ? "" : " wins"} ${ev.player_total}–${ev.banker_total}`;
    case "round_settled":
      return `Settled: ${ev.bets} bets, staked ${money(ev.staked)}, paid ${money(ev.paid)}`;
    case "bet_totals":
      return `Bets on the table: ${Object.entries(ev.totals || {}).map(([s, a]) => `${spotLabel(s)} ${money(a)}`).join(", ")}`;
    case "bet_placed":
      return `Bet: ${spotLabel(ev.spot)} ${money(ev.amount)}`;
    case "shoe_shuffled":
      return `New shoe #${ev.shoe}`;
    case "burn":
      return `Burn: ${ev.burned} cards`;
    case "cut_card":
      return "Cut card out";
    case "round_voided":
      return `Voided: ${ev.reason}`;
    default:
      return ev.kind;
  }
}
