// Draws the scoreboard roads the server sends in `snapshot.roads` (server/core/roads.py):
// bead plate and big road come with their row/col; the derived roads come as a list of
// red/blue marks, which are laid out here the way casinos draw them (a new column when the
// colour changes, six rows, a "dragon tail" to the right at the bottom or at an earlier tail).
// Pair dots, as casinos draw them: a red dot top-left for a Banker pair, a blue dot
// bottom-right for a Player pair, from the cells' `banker_pair`/`player_pair` (a big road cell
// has the pairs of the round it records; a tie's are on its bead plate cell).

import { h, clear } from "./dom.js";

const ROWS = 6;
const MIN_COLS = { bead: 12, big: 24, derived: 24 };
const LETTER = { banker: "B", player: "P", tie: "T" };
const WINNER_NAME = { banker: "Banker", player: "Player", tie: "Tie" };

export function renderRoads(container, roads) {
  const r = roads || {};
  fill(container.querySelector("[data-road=bead_plate]"), beadCells(r.bead_plate || []), MIN_COLS.bead);
  fill(container.querySelector("[data-road=big_road]"), bigRoadCells(r.big_road || []), MIN_COLS.big);
  for (const [name, style] of [
    ["big_eye_boy", "ring"],
    ["small_road", "dot"],
    ["cockroach_pig", "slash"],
  ]) {
    const el = container.querySelector(`[data-road=${name}]`);
    fill(el, derivedCells(r[name] || [], style), MIN_COLS.derived);
  }
}

// The scoreboard: five grids, each with a caption, in the order casinos show them.
export function scoreboard() {
  const grid = (name, testid, title) =>
    h(
      "figure",
      { class: `road road-${name}` },
      h("figcaption", { text: title }),
      h("div", {
        class: "road-grid",
        "data-road": name,
        "data-testid": testid,
        role: "img",
        "aria-label": title,
      }),
    );
  return h(
    "section",
    { class: "scoreboard", "aria-label": "Scoreboard" },
    grid("bead_plate", "bead-plate", "Bead plate"),
    grid("big_road", "big-road", "Big road"),
    h(
      "div",
      { class: "derived" },
      grid("big_eye_boy", "big-eye-boy", "Big eye boy"),
      grid("small_road", "small-road", "Small road"),
      grid("cockroach_pig", "cockroach-pig", "Cockroach pig"),
    ),
  );
}

function fill(el, cells, minCols) {
  if (!el) return;
  const key = JSON.stringify(cells.map((c) => [c.row, c.col, c.cls, c.text, c.ties, c.pairs]));
  if (el.dataset.key === key) return; // unchanged: keep the DOM (and the scroll) as it is
  el.dataset.key = key;
  clear(el);
  const cols = Math.max(minCols, ...cells.map((c) => c.col + 2));
  el.style.setProperty("--cols", cols);
  el.dataset.cells = String(cells.length);
  for (const cell of cells) {
    const node = h(
      "span",
      { class: `cell ${cell.cls}`, title: cell.title, style: `grid-row:${cell.row + 1};grid-column:${cell.col + 1}` },
      cell.text ? h("span", { class: "cell-text", text: cell.text }) : null,
      cell.ties ? h("span", { class: "tie-mark", text: cell.ties > 1 ? String(cell.ties) : "" }) : null,
      ...(cell.pairs || []).map((hand) =>
        h("span", { class: `pair-dot ${hand}`, "data-testid": "pair-dot", "data-pair": hand }),
      ),
    );
    el.append(node);
  }
  // The newest results are on the right: scroll just far enough to show the last column.
  const last = Math.max(-1, ...cells.map((c) => c.col));
  const cellWidth = el.scrollWidth / cols;
  el.scrollLeft = Math.max(0, (last + 2) * cellWidth - el.clientWidth);
}

// The hands whose first two cards were a pair, Banker first (the dot drawn top-left).
function pairsOf(c) {
  return [c.banker_pair && "banker", c.player_pair && "player"].filter(Boolean);
}

function pairWords(pairs) {
  return pairs.map((hand) => `, ${WINNER_NAME[hand]} pair`).join("");
}

function beadCells(cells) {
  return cells.map((c) => {
    const pairs = pairsOf(c);
    return {
      row: c.row,
      col: c.col,
      cls: `bead ${c.winner}`,
      text: LETTER[c.winner],
      pairs,
      title: `${WINNER_NAME[c.winner]}${pairWords(pairs)}`,
    };
  });
}

function bigRoadCells(cells) {
  return cells.map((c) => {
    const pairs = pairsOf(c);
    const ties = c.ties ? `, then ${c.ties} tie${c.ties > 1 ? "s" : ""}` : "";
    return {
      row: c.row,
      col: c.col,
      cls: `ring ${c.winner}${c.ties ? " has-ties" : ""}`,
      ties: c.ties || 0,
      pairs,
      title: `${WINNER_NAME[c.winner]}${pairWords(pairs)}${ties}`,
    };
  });
}

function derivedCells(marks, style) {
  return placeMarks(marks).map((c) => ({
    row: c.row,
    col: c.col,
    cls: `mark ${style} ${c.mark}`,
    title: c.mark,
  }));
}

// Lay a list of marks on a six-row grid like the big road: same mark goes down, a new mark
// starts the next column at the top; at the bottom row, or above an earlier tail, turn right.
export function placeMarks(marks) {
  const cells = [];
  const occupied = new Set();
  let startCol = -1;
  let tailing = false;
  let last = null;
  for (const mark of marks) {
    let row;
    let col;
    if (last === null || mark !== last.mark) {
      col = startCol + 1;
      while (occupied.has(`0,${col}`)) col += 1; // an earlier tail runs along the top row
      row = 0;
      startCol = col;
      tailing = false;
    } else if (tailing || last.row + 1 >= ROWS || occupied.has(`${last.row + 1},${last.col}`)) {
      tailing = true;
      row = last.row;
      col = last.col + 1;
    } else {
      row = last.row + 1;
      col = last.col;
    }
    occupied.add(`${row},${col}`);
    last = { row, col, mark };
    cells.push(last);
  }
  return cells;
}
