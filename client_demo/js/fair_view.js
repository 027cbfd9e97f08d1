// The committed shoe on the table page: its commitment and root, a mark on each card whose
// proof checked, and "Verify this shoe" once its seed is revealed (the checks: fairness.js).

import { h, setAttr, setText } from "./dom.js";
import { UNAVAILABLE } from "./fairness.js";

const MARKS = {
  ok: ["✓", "Checked: this card is the one committed at its position of the shoe"],
  bad: ["✗", "Mismatch"],
  pending: ["…", "Checking this card's proof"],
  unavailable: ["?", UNAVAILABLE],
  none: ["", ""],
};

function short(hex) {
  return hex ? `${hex.slice(0, 8)}…${hex.slice(-6)}` : "";
}

// A hash shown shortened; the whole on hover (title) and on click or Enter (toggles).
function hashField(testid, label) {
  const value = h("code", { class: "fair-hash", "data-testid": testid, tabindex: "0", role: "button" });
  const toggle = () => {
    value.classList.toggle("full");
    setText(value, value.classList.contains("full") ? value.dataset.value : short(value.dataset.value));
  };
  value.addEventListener("click", toggle);
  value.addEventListener("keydown", (event) => {
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      event.stopPropagation();
      toggle();
    }
  });
  return { el: h("span", { class: "fair-field" }, `${label} `, value), value };
}

function showHash(field, hex) {
  field.el.hidden = !hex;
  if (field.value.dataset.value === (hex || "")) return;
  field.value.dataset.value = hex || "";
  setAttr(field.value, "data-value", hex || "");
  setAttr(field.value, "title", hex || null);
  setText(field.value, field.value.classList.contains("full") ? hex || "" : short(hex));
}

export class FairPanel {
  constructor(app, tableId) {
    this.app = app;
    this.tableId = tableId;
    this.shoe = h("span", { class: "fair-shoe" });
    this.commitment = hashField("fair-commitment", "commitment");
    this.root = hashField("fair-root", "root");
    this.status = h("span", { class: "fair-status", "data-testid": "fair-status" });
    this.verify = h(
      "button",
      { type: "button", class: "fair-verify", "data-testid": "fair-verify", hidden: true, onclick: () => this.run() },
      "Verify this shoe",
    );
    this.result = h("p", { class: "fair-result", "data-testid": "fair-verify-result", role: "status", "aria-live": "polite", hidden: true });
    this.el = h(
      "div",
      { class: "fair-panel", "data-testid": "fair" },
      h("span", { class: "fair-title", title: "Provably fair shoe (bac-shoe-v1): see docs/fairness.md" }, "Fair shoe"),
      this.shoe,
      this.commitment.el,
      this.root.el,
      this.status,
      this.verify,
      this.result,
    );
  }

  run() {
    this.app.verifyShoe(this.tableId);
  }

  fill(st) {
    const tracker = st.fair;
    const rec = tracker.current;
    this.el.hidden = !rec;
    if (!rec) return;
    setText(this.shoe, `Shoe #${rec.shoe}${rec.sealed ? " sealed" : " committed"}`);
    setAttr(this.el, "data-shoe", rec.shoe);
    showHash(this.commitment, rec.commitment);
    showHash(this.root, rec.sealed ? rec.root : null);
    const seen = [...rec.seen.values()];
    const count = (state) => seen.filter((e) => e.state === state).length;
    let status = "";
    if (!tracker.available) status = `Cards cannot be checked here (needs https or localhost)`;
    else if (count("bad")) status = `${count("bad")} card${count("bad") > 1 ? "s" : ""} did not check ✗`;
    else if (seen.length) status = `${count("ok")} card${count("ok") === 1 ? "" : "s"} checked ✓`;
    setText(this.status, status);
    setAttr(this.status, "data-available", tracker.available ? "true" : "false");
    this.fillVerify(tracker.revealed);
  }

  fillVerify(rec) {
    this.verify.hidden = !rec;
    this.result.hidden = !rec?.verification;
    if (!rec) return;
    setText(this.verify, `Verify shoe #${rec.shoe}`);
    setAttr(this.verify, "data-shoe", rec.shoe);
    const v = rec.verification;
    this.verify.disabled = Boolean(v?.running);
    if (!v) return;
    setText(this.result, v.text);
    setAttr(this.result, "data-result", v.running ? "running" : v.ok ? "ok" : "bad");
    setAttr(this.result, "data-shoe", rec.shoe);
    this.result.className = `fair-result ${v.running ? "" : v.ok ? "ok" : "bad"}`;
  }
}

// Each card element of `box` (in the order of `cards`) gets data-proof and a mark.
export function markCards(box, cards, tracker) {
  [...box.children].forEach((el, i) => {
    const card = cards[i];
    if (!card) return;
    const { state, reason } = card.position === undefined ? { state: "none", reason: "" } : tracker.mark(card.shoe, card.position);
    if (el.dataset.proof === state && el.dataset.proofReason === reason) return;
    el.dataset.proof = state;
    el.dataset.proofReason = reason;
    setAttr(el, "data-position", card.position);
    const [symbol, words] = MARKS[state] || MARKS.none;
    let mark = el.querySelector(".card-proof");
    if (!mark) {
      mark = h("span", { class: "card-proof", "aria-hidden": "true" });
      el.append(mark);
    }
    setText(mark, symbol);
    const title = state === "bad" ? `${words}: ${reason}` : words;
    setAttr(el, "title", title || null);
    const name = el.getAttribute("aria-label").split(" (")[0];
    el.setAttribute("aria-label", title ? `${name} (${title})` : name);
  });
}
