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

// Keep `box` showing exactly `cards` (in deal order) without re-dealing those already shown.
export function syncCards(box, cards, testid = "card") {
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
    box.append(cardElement({ ...cards[i], third: i === 2 }, testid, true));
  }
}
