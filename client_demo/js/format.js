// Words and numbers for people: money, cards, spots, payouts, phases.

export const SPOTS = ["player_pair", "player", "tie", "banker", "banker_pair"];

const SPOT_LABELS = {
  player: "Player",
  banker: "Banker",
  tie: "Tie",
  player_pair: "Player Pair",
  banker_pair: "Banker Pair",
};

export const SUIT_SYMBOLS = { c: "♣", d: "♦", h: "♥", s: "♠" };
const SUIT_NAMES = { c: "clubs", d: "diamonds", h: "hearts", s: "spades" };
const RANK_NAMES = { A: "ace", J: "jack", Q: "queen", K: "king" };

const PHASE_LABELS = {
  idle: "Waiting for the first round",
  betting: "Place your bets",
  dealing: "No more bets",
  settled: "Round over",
  voided: "Round voided",
};

export function spotLabel(spot) {
  return SPOT_LABELS[spot] || spot.replace(/_/g, " ");
}

export function winnerLabel(winner) {
  return SPOT_LABELS[winner] || winner;
}

export function phaseLabel(phase) {
  return PHASE_LABELS[phase] || phase;
}

// Minor units (cents) to "1,234.56"; integers only, so no float rounding ever shows.
export function money(minor) {
  if (typeof minor !== "number" || !Number.isFinite(minor)) return "—";
  const sign = minor < 0 ? "-" : "";
  const abs = Math.abs(minor);
  const units = Math.floor(abs / 100);
  const cents = String(abs % 100).padStart(2, "0");
  return `${sign}${units.toLocaleString("en-US")}.${cents}`;
}

export function signedMoney(minor) {
  return minor > 0 ? `+${money(minor)}` : money(minor);
}

// Baccarat value of a rank: A = 1, 2-9 face value, 10 and pictures 0.
export function cardPoints(rank) {
  if (rank === "A") return 1;
  const n = Number(rank);
  return Number.isInteger(n) && n >= 2 && n <= 9 ? n : 0;
}

export function handTotal(cards) {
  return cards.reduce((sum, card) => sum + cardPoints(card.rank), 0) % 10;
}

export function cardName(rank, suit) {
  const name = RANK_NAMES[rank] || rank;
  return `${name} of ${SUIT_NAMES[suit] || suit}`;
}

// "Ks" / "10c" from a round_result hand list to {rank, suit}.
export function parseCard(text) {
  return { rank: text.slice(0, -1), suit: text.slice(-1) };
}

export function ratio(numerator, denominator = 1) {
  return `${numerator}:${denominator}`;
}

// What a winning bet on `spot` pays at this table, from its rules.
export function payoutText(spot, rules) {
  if (!rules) return "";
  switch (spot) {
    case "player":
      return "1:1";
    case "banker": {
      if (rules.no_commission) return "1:1 (1:2 on a 6)";
      const bp = rules.banker_commission_bp ?? 0;
      return bp ? `1:1 less ${bp / 100}%` : "1:1";
    }
    case "tie":
      return ratio(rules.tie_pays);
    case "player_pair":
    case "banker_pair":
      return ratio(rules.pair_pays);
    default:
      return "";
  }
}

export function limitText(limit) {
  if (!Array.isArray(limit)) return "";
  return `${money(limit[0])} – ${money(limit[1])}`;
}

// A table's name for players: its rules' `title` (the preset's or the tables file's `name`),
// else its id. (`rules.name` is the rules' key, e.g. "classic8": not for players.)
export function tableTitle(id, rules) {
  return rules?.title || id;
}

export function rulesSummary(rules) {
  if (!rules) return "";
  const parts = [`${rules.decks} deck${rules.decks === 1 ? "" : "s"}`];
  parts.push(
    rules.no_commission
      ? "no commission"
      : `Banker ${(rules.banker_commission_bp ?? 0) / 100}% commission`,
  );
  parts.push(`Tie ${ratio(rules.tie_pays)}`, `Pairs ${ratio(rules.pair_pays)}`);
  if (rules.reshuffle_every_round) parts.push("new shoe every round");
  else parts.push(`cut card ${rules.cut_card_from_end} from the back`);
  return parts.join(" · ");
}

export function seconds(ms) {
  return `${(Math.max(0, ms) / 1000).toFixed(1)} s`;
}

export function clockTime(ms) {
  if (typeof ms !== "number") return "";
  return new Date(ms).toLocaleTimeString();
}
