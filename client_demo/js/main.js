// Boot: the app, the header (connection, player, balance), the router (#/ and #/t/<id>).

import { App } from "./app.js";
import { h, setAttr, setText } from "./dom.js";
import { money, tableTitle } from "./format.js";
import { LobbyView } from "./lobby.js";
import { TableView } from "./table_view.js";

// ?guest=new: this tab is a guest of its own (its token lives in sessionStorage, so a refresh
// keeps it), e.g. to play against a friend in another tab of the same browser.
const perTab = new URLSearchParams(window.location.search).has("guest");
const app = new App(window.location, perTab ? window.sessionStorage : window.localStorage);
window.__baccarat = app; // for tests and curious developers: the whole state, read-only please

const header = buildHeader();
const main = document.getElementById("main");
let view = null;
let viewKey = "";

function buildHeader() {
  const el = {
    connection: document.querySelector("[data-testid=connection]"),
    connectionText: document.querySelector("[data-testid=connection] .conn-text"),
    player: document.querySelector("[data-testid=player]"),
    balance: document.querySelector("[data-testid=balance]"),
    notices: document.querySelector("[data-testid=notice]"),
    offline: document.querySelector(".offline"),
    refusal: document.querySelector("[data-testid=refusal]"),
    refusalText: document.querySelector("[data-testid=refusal] .refusal-text"),
    tokenForm: document.querySelector(".token-form"),
    tokenInput: document.querySelector("[data-testid=token-input]"),
  };
  el.tokenForm.addEventListener("submit", (event) => {
    event.preventDefault();
    app.useToken(el.tokenInput.value);
    el.tokenInput.value = "";
  });
  return {
    update() {
      const state = app.connState;
      setAttr(el.connection, "data-state", state);
      const refusal = app.refusal;
      let text = "Connecting…";
      if (state === "open") text = "Connected";
      if (state === "reconnecting") {
        const d = app.connDetail;
        let why = d.opened ? "Connection lost" : "Cannot reach the server";
        if (refusal && !d.opened) why = `The server answered ${refusal.status}: ${refusal.reason}`;
        text = `${why}: reconnecting (attempt ${app.conn.attempt})…`;
      }
      if (state === "refused") text = `Refused by the server: ${refusal?.reason || "401"}`;
      setText(el.connectionText, text);
      el.offline.hidden = state !== "reconnecting";
      el.refusal.hidden = state !== "refused";
      if (state === "refused") {
        const what = refusal?.token ? "The server refused the token" : "This server does not let anyone in without a token";
        setText(el.refusalText, `${what}: ${refusal?.reason || "401"}.`);
      }
      const who = app.player
        ? `${app.name || app.player}${app.isSpectator ? " (spectator)" : ""}`
        : app.isSpectator
          ? "Spectator"
          : "";
      setText(el.player, who);
      setAttr(el.player, "data-player", app.player);
      setAttr(el.player, "data-role", app.role || (app.isSpectator ? "spectator" : app.player ? "player" : null));
      setText(el.balance, app.balance === null ? "—" : money(app.balance));
      setAttr(el.balance, "data-value", app.balance);
      // While disconnected the balance is only the last one known.
      const stale = state !== "open" && app.balance !== null;
      setAttr(el.balance, "data-stale", stale ? "true" : null);
      setAttr(el.balance, "title", stale ? "Last known balance: not connected" : null);
      el.balance.parentElement.hidden = app.isSpectator; // a spectator has no money here
      // A notice about a table is shown on that table's page only, unless it is about money.
      const visible = app.notices.filter((n) => !n.table || n.table === viewedTable() || n.level === "error");
      const shown = [...el.notices.children].map((n) => n.dataset.id).join(",");
      if (shown !== visible.map((n) => n.id).join(",")) {
        el.notices.replaceChildren(
          ...visible.map((n) => h("p", { class: `notice ${n.level}`, "data-id": n.id, text: n.text })),
        );
      }
    },
  };
}

function viewedTable() {
  const match = window.location.hash.match(/^#\/t\/(.+)$/);
  return match ? decodeURIComponent(match[1]) : null;
}

function route() {
  const match = window.location.hash.match(/^#\/t\/(.+)$/);
  const key = match ? `t:${decodeURIComponent(match[1])}` : "lobby";
  if (key === viewKey) return;
  viewKey = key;
  if (view) view.destroy();
  view = match ? new TableView(app, decodeURIComponent(match[1])) : new LobbyView(app);
  main.replaceChildren(view.el);
  view.update({ kind: "route" });
  const title = view.el.querySelector("h2");
  if (title) title.focus({ preventScroll: true });
  const tableId = match ? decodeURIComponent(match[1]) : null;
  document.title = match ? `${tableTitle(tableId, app.tables.get(tableId)?.rules)} · Live Baccarat` : "Live Baccarat";
  header.update(); // the notices shown depend on the table in view
}

app.subscribe((change) => {
  header.update();
  if (change.kind !== "notice") view?.update(change);
});
window.addEventListener("hashchange", route);
setInterval(() => view?.tick(), 100);
route();
header.update();
app.start();
