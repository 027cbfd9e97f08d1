// Playing cards as elements: rank and suit readable at any size, dealt with an animation.

import { h } from "./dom.js";
import { SUIT_SYMBOLS, cardName } from "./format.js";

const RED = new Set(["d", "h"]);

export function cardElement(card, testid = "card", animate = true) {
  const symbol = SUIT_SYMBOLS[card.suit] || card.suit;
  return h(
    "div",
    {
      class: `card${RED.has(card.suit) ? " red" : ""}${animate ? " dealt" : ""}${card.third ? " third" : ""}`,
      "data-testid": testid,
      "data-hand": card.hand,
      "data-rank": card.rank,
      "data-suit": card.suit,
      "data-index": card.index,
      role: "img",
      "aria-label": cardName(card.rank, card.suit),
    },
    h("span", { class: "card-corner" }, h("span", { class: "card-rank", text: card.rank }), h("span", { text: symbol })),
    h("span", { class: "card-pip", text: symbol }),
  );
}

// A card being dealt is "landing" until its animation ends: a hand total counts only the
// cards that have appeared (`landedCards`). `onLand` is called when one lands.
const LAND_FALLBACK_MS = 800; // no animationend (reduced motion, a hidden tab): land anyway

function dealInto(box, el, onLand) {
  el.dataset.landing = "1";
  let done = false;
  const land = () => {
    if (done) return;
    done = true;
    delete el.dataset.landing;
    if (onLand) onLand();
  };
  el.addEventListener("animationend", land, { once: true });
  box.append(el);
  if (getComputedStyle(el).animationName === "none") land();
  else setTimeout(land, LAND_FALLBACK_MS);
}

// The cards of `box` that have appeared, as {rank, suit}.
export function landedCards(box) {
  return [...box.children]
    .filter((el) => !el.dataset.landing)
    .map((el) => ({ rank: el.dataset.rank, suit: el.dataset.suit }));
}

// Keep `box` showing exactly `cards` (in deal order) without re-dealing those already shown.
export function syncCards(box, cards, testid = "card", onLand = null) {
  const shown = [...box.children];
  const same =
    shown.length <= cards.length &&
    shown.every(
      (el, i) =>
        el.dataset.rank === cards[i].rank &&
        el.dataset.suit === cards[i].suit &&
        el.dataset.index === String(cards[i].index),
    );
  if (!same) {
    box.replaceChildren();
    cards.forEach((card, i) => box.append(cardElement({ ...card, third: i === 2 }, testid, false)));
    return;
  }
  for (let i = shown.length; i < cards.length; i += 1) {
    dealInto(box, cardElement({ ...cards[i], third: i === 2 }, testid, true), onLand);
  }
}
