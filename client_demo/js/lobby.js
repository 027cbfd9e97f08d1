// The lobby: every table the server runs, its rules, what it is doing now, who is there.

import { h, setAttr, setText } from "./dom.js";
import {
  SPOTS,
  limitText,
  money,
  payoutText,
  phaseLabel,
  rulesSummary,
  seconds,
  spotLabel,
  tableTitle,
} from "./format.js";

const STATUS_POLL_MS = 5000;
const LETTER_CLASS = { B: "banker", P: "player", T: "tie" };

export class LobbyView {
  constructor(app) {
    this.app = app;
    this.entries = new Map(); // table id -> {el, parts}
    this.list = h("div", { class: "lobby-list" });
    this.empty = h("p", { class: "lobby-empty", text: "Connecting to the server…" });
    this.guestLink = h(
      "span",
      { class: "guest-link" },
      "open ",
      h("a", { href: "/?guest=new#/", target: "_blank", rel: "noopener" }, "another tab as a new guest"),
      " or ",
    );
    this.el = h(
      "section",
      { class: "lobby", "data-testid": "lobby", "aria-labelledby": "lobby-title" },
      h("h2", { id: "lobby-title", tabindex: "-1", text: "Tables" }),
      h(
        "p",
        { class: "lobby-hint" },
        "Pick a table to play. Each one has its own shoe and its own rules; your balance is shared. ",
        "Play with a friend: ",
        this.guestLink,
        h("a", { href: "/?role=spectator#/", target: "_blank", rel: "noopener" }, "watch as a spectator"),
        ".",
      ),
      this.empty,
      this.list,
    );
    this.watchers = null; // {table: count} from /lobby, this node only
    this.poll = setInterval(() => this.fetchStatus(), STATUS_POLL_MS);
    this.fetchStatus();
  }

  destroy() {
    clearInterval(this.poll);
  }

  // /lobby says how many connections of this server node follow each table (/status says
  // it too, but only to operators once the server has a secret).
  async fetchStatus() {
    if (this.app.connState !== "open") return; // asked again when the page is back
    try {
      const response = await fetch("/lobby", { cache: "no-store" });
      if (!response.ok) throw new Error(String(response.status));
      const status = await response.json();
      this.watchers = status.subscribers || null;
      if (typeof status.guests === "boolean") this.app.guestsAllowed = status.guests;
    } catch {
      this.watchers = null; // not offered (e.g. behind a proxy): show nothing rather than guess
    }
    this.update();
  }

  update(change = {}) {
    const { app } = this;
    // No "new guest" tab where the server lets no guest in (a --secret site).
    this.guestLink.hidden = app.guestsAllowed === false;
    // Once the page has joined the tables, /lobby counts it among their watchers.
    if (change.what === "joined" && !this.askedAfterJoin) {
      this.askedAfterJoin = true;
      this.fetchStatus();
    }
    if (change.kind === "connection" && app.connState !== "open") this.askedAfterJoin = false;
    this.empty.hidden = app.tableOrder.length > 0;
    for (const id of app.tableOrder) {
      const st = app.tables.get(id);
      if (!st) continue;
      let entry = this.entries.get(id);
      if (!entry) {
        entry = this.build(st);
        this.entries.set(id, entry);
      }
      this.fill(entry, st);
    }
    for (const [id, entry] of this.entries) {
      if (!app.tables.has(id)) {
        entry.el.remove();
        this.entries.delete(id);
      }
    }
    const order = app.tableOrder.map((id) => this.entries.get(id)?.el).filter(Boolean);
    if (order.some((el, i) => this.list.children[i] !== el)) this.list.replaceChildren(...order);
  }

  build(st) {
    const parts = {
      phase: h("span", { class: "phase-pill" }),
      time: h("span", { class: "lobby-time" }),
      people: h("span", { class: "lobby-people" }),
      round: h("span", { class: "lobby-round" }),
      results: h("span", { class: "mini-road", "aria-label": "Results this shoe" }),
    };
    const rules = st.rules;
    const title = tableTitle(st.id, rules);
    const limits = h(
      "table",
      { class: "lobby-limits" },
      h("thead", {}, h("tr", {}, h("th", { text: "Bet" }), h("th", { text: "Pays" }), h("th", { text: "Limits" }))),
      h(
        "tbody",
        {},
        SPOTS.filter((spot) => rules.limits?.[spot]).map((spot) =>
          h(
            "tr",
            {},
            h("td", { text: spotLabel(spot) }),
            h("td", { text: payoutText(spot, rules) }),
            h("td", { text: limitText(rules.limits[spot]) }),
          ),
        ),
      ),
    );
    const el = h(
      "a",
      {
        class: "lobby-table",
        href: `#/t/${encodeURIComponent(st.id)}`,
        "data-testid": `table-${st.id}`,
        "data-table": st.id,
      },
      h(
        "div",
        { class: "lobby-head" },
        h(
          "h3",
          {},
          h("span", { class: "lobby-title", "data-testid": "lobby-title", text: title }),
          title !== st.id ? h("span", { class: "lobby-id", text: st.id }) : null,
        ),
        parts.phase,
      ),
      rules.description ? h("p", { class: "lobby-desc", "data-testid": "lobby-desc", text: rules.description }) : null,
      h("p", { class: "lobby-rules", text: rulesSummary(rules) }),
      limits,
      h("div", { class: "lobby-live" }, parts.round, parts.time, parts.people),
      parts.results,
    );
    return { el, parts };
  }

  fill(entry, st) {
    const { parts } = entry;
    const offline = this.app.connState !== "open" && st.seq !== null;
    setAttr(entry.el, "data-phase", st.phase);
    setText(parts.phase, offline ? "Disconnected" : st.seq === null ? "…" : phaseLabel(st.phase));
    setAttr(parts.phase, "data-phase", offline ? "offline" : st.phase);
    setText(parts.round, st.round ? `Round ${st.round} · shoe ${st.shoe}` : "No round yet");
    const people = [];
    const watching = this.watchers?.[st.id];
    if (typeof watching === "number") people.push(`${watching} watching here`);
    if (st.phase === "betting" || st.bettors) {
      people.push(`${st.bettors} betting`);
      const staked = Object.values(st.totals).reduce((a, b) => a + b, 0);
      if (staked) people.push(`${money(staked)} on the table`);
    }
    setText(parts.people, people.join(" · "));
    const results = st.results.slice(-24);
    if (parts.results.dataset.results !== results) {
      parts.results.dataset.results = results;
      parts.results.replaceChildren(
        ...[...results].map((letter) => h("span", { class: `mini ${LETTER_CLASS[letter] || ""}`, text: letter })),
      );
    }
    this.tickEntry(entry, st);
  }

  tick() {
    for (const [id, entry] of this.entries) {
      const st = this.app.tables.get(id);
      if (st) this.tickEntry(entry, st);
    }
  }

  tickEntry(entry, st) {
    const left = this.app.timeLeft(st);
    const open = this.app.connState === "open";
    setText(entry.parts.time, open && st.phase === "betting" ? `${seconds(left)} left to bet` : "");
  }
}
