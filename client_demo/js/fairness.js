// The committed shoe (bac-shoe-v1, docs/fairness.md) checked in the page, with WebCrypto only:
// each card shown against the sealed Merkle root as it arrives, and once the seed is revealed
// the whole shoe recomputed (commitment, client seed, shuffle, cut card, salts, root, and every
// card seen at its position). Nothing here touches the DOM (fair_view.js draws it).
//
// crypto.subtle exists only in a secure context (https, or http on 127.0.0.1 / localhost): on
// plain http to another host the page says the cards cannot be checked, never "checked".

export const ALG = "bac-shoe-v1";
const RANKS = ["A", "2", "3", "4", "5", "6", "7", "8", "9", "T", "J", "Q", "K"];
const SUITS = ["c", "d", "h", "s"];
const TWO_32 = 2 ** 32;
const UTF8 = new TextEncoder();
const KEEP_SHOES = 4; // shoes remembered per table (the current one, the last revealed, ...)

export function fairAvailable() {
  return Boolean(globalThis.isSecureContext !== false && globalThis.crypto?.subtle);
}

export const UNAVAILABLE = "cards cannot be checked here (needs https or localhost)";

// --- bytes ---------------------------------------------------------------------------------
export function hexToBytes(hex) {
  if (typeof hex !== "string" || hex.length % 2 || /[^0-9a-f]/.test(hex)) throw new Error(`not lower-case hex: ${hex}`);
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i += 1) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export function bytesToHex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export function u32(x) {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, x);
  return out;
}

function u64(x) {
  const out = new Uint8Array(8);
  const view = new DataView(out.buffer);
  view.setUint32(0, Math.floor(x / TWO_32));
  view.setUint32(4, x % TWO_32);
  return out;
}

// --- hashes --------------------------------------------------------------------------------
export async function sha256(bytes) {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
}

export async function hmacKey(keyBytes) {
  return crypto.subtle.importKey("raw", keyBytes, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
}

export async function hmac(key, message) {
  return new Uint8Array(await crypto.subtle.sign("HMAC", key, message));
}

// --- the spec, step by step ------------------------------------------------------------------
// §1
export async function commitment(seed) {
  return bytesToHex(await sha256(seed));
}

// §2: the length-prefixed UTF-8 values, in order.
export function clientSeedPreimage(values) {
  return concat(...values.flatMap((v) => {
    const b = UTF8.encode(v);
    return [u32(b.length), b];
  }));
}

export async function clientSeed(values) {
  return sha256(clientSeedPreimage(values));
}

// §3 and §4: the HMAC-SHA256 word stream and unbiased randbelow. Blocks are made 64 at a
// time (one Promise.all), so a shoe's ~420 words cost a handful of awaits.
export class Stream {
  constructor(key, clientSeedBytes) {
    this.key = key;
    this.clientSeed = clientSeedBytes;
    this.blocks = []; // Uint8Array(32) each
    this.words = [];
    this.wordsRead = 0;
  }

  async fill(count = 64) {
    const first = this.blocks.length;
    const made = await Promise.all(
      Array.from({ length: count }, (_, i) => hmac(this.key, concat(this.clientSeed, u64(first + i)))),
    );
    for (const block of made) {
      this.blocks.push(block);
      const view = new DataView(block.buffer);
      for (let i = 0; i < 8; i += 1) this.words.push(view.getUint32(4 * i));
    }
  }

  async word() {
    if (this.wordsRead >= this.words.length) await this.fill();
    const w = this.words[this.wordsRead];
    this.wordsRead += 1;
    return w;
  }

  async randbelow(n) {
    if (!Number.isInteger(n) || n < 1 || n > TWO_32) throw new Error(`randbelow(${n})`);
    const limit = TWO_32 - (TWO_32 % n);
    for (;;) {
      const w = await this.word();
      if (w < limit) return w % n;
    }
  }
}

// §5: decks copies of clubs, diamonds, hearts, spades, each A 2 … 9 T J Q K.
export function canonicalShoe(decks) {
  const deck = SUITS.flatMap((s) => RANKS.map((r) => r + s));
  return Array.from({ length: decks }, () => deck).flat();
}

export function cardCode(rank, suit) {
  return (rank === "10" ? "T" : rank) + (suit || "-");
}

// The burn (§6.3): the card at position 0 is shown, its value in cards burned after it.
export function burnCount(code) {
  const rank = code[0];
  if (rank === "A") return 1;
  if ("TJQK".includes(rank)) return 10;
  return Number(rank);
}

// §6: Fisher–Yates over the canonical shoe, then the cut card, from one stream.
export async function shuffleShoe(seed, clientSeedBytes, decks, [lo, hi]) {
  const stream = new Stream(await hmacKey(seed), clientSeedBytes);
  const cards = canonicalShoe(decks);
  for (let i = cards.length - 1; i >= 1; i -= 1) {
    const j = await stream.randbelow(i + 1);
    [cards[i], cards[j]] = [cards[j], cards[i]];
  }
  const behind = lo + (await stream.randbelow(hi - lo + 1));
  return { cards, cutIndex: cards.length - behind, burn: burnCount(cards[0]) };
}

// §7
export async function positionSalts(seed, count) {
  const key = await hmacKey(seed);
  const salt = UTF8.encode("salt");
  return Promise.all(Array.from({ length: count }, (_, i) => hmac(key, concat(salt, u32(i)))));
}

export async function leafHash(position, code, salt) {
  return sha256(concat(Uint8Array.of(0), u32(position), UTF8.encode(code), salt));
}

async function nodeHash(left, right) {
  return sha256(concat(Uint8Array.of(1), left, right));
}

// §8: level by level; an odd level's last node moves up unchanged.
export async function merkleRoot(leaves) {
  let level = leaves;
  while (level.length > 1) {
    const pairs = [];
    for (let i = 0; i + 1 < level.length; i += 2) pairs.push(nodeHash(level[i], level[i + 1]));
    const next = await Promise.all(pairs);
    if (level.length % 2) next.push(level[level.length - 1]);
    level = next;
  }
  return level[0];
}

// The sides a proof of leaf `index` must take in a tree of `size` leaves (merkle.path_sides).
export function pathSides(index, size) {
  const sides = [];
  let count = size;
  let i = index;
  while (count > 1) {
    if (i % 2) sides.push("L");
    else if (i + 1 < count) sides.push("R");
    i = Math.floor(i / 2);
    count = Math.ceil(count / 2);
  }
  return sides;
}

// One card against the sealed root: {ok, reason}. `proof` is the wire's list of "L"/"R" + hex.
export async function checkCard({ root, size, position, code, salt, proof }) {
  if (!Number.isInteger(position) || position < 0 || position >= size) {
    return { ok: false, reason: `position ${position} is outside a shoe of ${size} cards` };
  }
  if (!Array.isArray(proof) || proof.some((s) => typeof s !== "string" || !/^[LR][0-9a-f]{64}$/.test(s))) {
    return { ok: false, reason: "its proof is malformed" };
  }
  if (typeof salt !== "string" || !/^[0-9a-f]{64}$/.test(salt)) return { ok: false, reason: "its salt is malformed" };
  const sides = proof.map((s) => s[0]).join("");
  if (sides !== pathSides(position, size).join("")) {
    return { ok: false, reason: `its proof is not the path of position ${position} in a shoe of ${size} cards` };
  }
  let running = await leafHash(position, code, hexToBytes(salt));
  for (const step of proof) {
    const sibling = hexToBytes(step.slice(1));
    running = step[0] === "L" ? await nodeHash(sibling, running) : await nodeHash(running, sibling);
  }
  if (bytesToHex(running) !== root) return { ok: false, reason: "its proof does not lead to the sealed root" };
  return { ok: true, reason: "" };
}

// --- the whole shoe, after the reveal --------------------------------------------------------
// `shoe`: {seed, commitment, sealed, entropy (or null), clientSeed, root, decks, cutFromEnd,
// cutIndex, size, seen: [{position, code}]}. Returns {ok, text, cards}.
export async function verifyShoe(shoe) {
  const fail = (text) => ({ ok: false, text: `Mismatch: ${text}` });
  if (!fairAvailable()) return { ok: false, text: `The shoe cannot be verified here: ${UNAVAILABLE}` };
  if (!shoe.seed) return { ok: false, text: "The seed is not revealed yet" };
  const seed = hexToBytes(shoe.seed);
  if (seed.length !== 32) return fail("the revealed seed is not 32 bytes");
  if (shoe.commitment && (await commitment(seed)) !== shoe.commitment) {
    return fail("SHA-256 of the revealed seed is not the commitment");
  }
  if (!shoe.sealed) return { ok: true, text: "Verified: revealed before its seal, the seed matches the commitment", cards: 0 };
  if (shoe.entropy && bytesToHex(await clientSeed(shoe.entropy)) !== shoe.clientSeed) {
    return fail("the client seed is not the hash of the published entropy");
  }
  const made = await shuffleShoe(seed, hexToBytes(shoe.clientSeed), shoe.decks, shoe.cutFromEnd);
  if (shoe.size !== null && shoe.size !== made.cards.length) return fail(`the shoe has ${made.cards.length} cards, not ${shoe.size}`);
  if (shoe.cutIndex !== null && shoe.cutIndex !== made.cutIndex) {
    return fail(`the cut card is at ${made.cutIndex} in the revealed shoe, not ${shoe.cutIndex}`);
  }
  const salts = await positionSalts(seed, made.cards.length);
  const leaves = await Promise.all(made.cards.map((code, i) => leafHash(i, code, salts[i])));
  const root = bytesToHex(await merkleRoot(leaves));
  if (root !== shoe.root) return fail(`the sealed root ${shoe.root} is not the revealed shoe's ${root}`);
  const seen = [...shoe.seen].sort((a, b) => a.position - b.position);
  for (const card of seen) {
    if (made.cards[card.position] !== card.code) {
      return fail(`position ${card.position}: ${card.code} shown, the revealed shoe has ${made.cards[card.position]}`);
    }
  }
  for (let i = 1; i < seen.length; i += 1) {
    if (seen[i].position !== seen[i - 1].position + 1) return fail(`no card was shown at position ${seen[i - 1].position + 1}`);
  }
  const from = seen.length && seen[0].position > 0 ? ` (from position ${seen[0].position}: the page joined mid-shoe)` : "";
  return {
    ok: true,
    text: `Verified: ${seen.length} cards, root matches: shoe #${shoe.shoe} of ${made.cards.length} cards recomputed from its seed${from}`,
    cards: seen.length,
  };
}

// --- a table's shoes as their events arrive ---------------------------------------------------
// Synchronous bookkeeping (TableState calls it with each snapshot and event); the checks are
// async and call `onChange` when a card's mark changes. A mark: {state, reason}, state one of
// "ok" (the proof checked), "bad" (mismatch: reason says why), "pending", "unavailable" (no
// WebCrypto here), "none" (no proof: a shoe an older node started).
export class FairTracker {
  constructor() {
    this.shoes = new Map(); // shoe number -> record
    this.current = null; // the record of the shoe being played
    this.onChange = null;
    this.available = fairAvailable();
  }

  record(number) {
    let rec = this.shoes.get(number);
    if (!rec) {
      rec = {
        shoe: number, alg: ALG, commitment: null, decks: null, cutFromEnd: null,
        sealed: false, entropy: null, clientSeed: null, root: null, cutIndex: null,
        size: null, next: null, seed: null, seen: new Map(), verification: null,
      }; // prettier-ignore
      this.shoes.set(number, rec);
      for (const old of [...this.shoes.keys()].sort((a, b) => a - b).slice(0, -KEEP_SHOES)) this.shoes.delete(old);
    }
    return rec;
  }

  // The last shoe whose seed is public: what "Verify this shoe" recomputes.
  get revealed() {
    const numbers = [...this.shoes.values()].filter((r) => r.seed).map((r) => r.shoe);
    return numbers.length ? this.shoes.get(Math.max(...numbers)) : null;
  }

  mark(shoe, position) {
    const entry = this.shoes.get(shoe)?.seen.get(position);
    return entry ? { state: entry.state, reason: entry.reason } : { state: "none", reason: "" };
  }

  applySnapshot(fair, cards = []) {
    if (!fair) return;
    const rec = this.record(fair.shoe);
    this.current = rec;
    Object.assign(rec, {
      alg: fair.alg, commitment: fair.commitment, decks: fair.decks,
      cutFromEnd: fair.cut_from_end, sealed: fair.sealed,
    }); // prettier-ignore
    if (fair.sealed) {
      Object.assign(rec, { clientSeed: fair.client_seed, root: fair.root, cutIndex: fair.cut_index, size: fair.cards });
      if (fair.entropy) rec.entropy = fair.entropy;
      (fair.proofs || []).forEach((p, i) => {
        const card = cards[i];
        if (card) this.see(rec, p.position, cardCode(card.rank, card.suit), p.salt, p.proof, false);
      });
      rec.next = fair.position;
    }
    if (fair.seed) rec.seed = fair.seed;
  }

  apply(ev) {
    switch (ev.kind) {
      case "shoe_committed":
        this.current = this.record(ev.shoe);
        Object.assign(this.current, { alg: ev.alg, commitment: ev.commitment });
        break;
      case "shoe_sealed": {
        const rec = this.record(ev.shoe);
        Object.assign(rec, {
          alg: ev.alg, sealed: true, entropy: ev.entropy, clientSeed: ev.client_seed,
          root: ev.root, cutFromEnd: ev.cut_from_end, decks: ev.decks, next: 0,
        }); // prettier-ignore
        this.current = rec;
        break;
      }
      case "shoe_shuffled":
        Object.assign(this.record(ev.shoe), { size: ev.cards, cutIndex: ev.cut_index, decks: ev.decks });
        this.recheck(this.record(ev.shoe));
        break;
      case "burn": {
        const rec = this.record(ev.shoe);
        this.see(rec, ev.position, cardCode(ev.shown?.rank, ev.shown?.suit), ev.salt, ev.proof);
        for (const b of ev.burnt || []) this.see(rec, b.position, cardCode(b.card?.rank, b.card?.suit), b.salt, b.proof);
        break;
      }
      case "card":
        if (this.current && ev.position !== undefined) {
          this.see(this.current, ev.position, cardCode(ev.rank, ev.suit), ev.salt, ev.proof);
        }
        break;
      case "shoe_revealed":
        this.record(ev.shoe).seed = ev.seed;
        break;
      default:
        break;
    }
  }

  // A card shown at `position`: its proof is checked, and (`inOrder`) that it is the next
  // position of the shoe: a skipped or reused position is a mismatch whatever the proof.
  see(rec, position, code, salt, proof, inOrder = true) {
    const known = rec.seen.get(position);
    if (known && known.code === code && known.salt === salt) return; // the same card again
    const entry = { position, code, salt, proof, state: "pending", reason: "" };
    if (!salt && Array.isArray(proof) && !proof.length) {
      Object.assign(entry, { state: "none", reason: "this shoe was started by an older server: its cards carry no proof" });
    } else if (known) {
      Object.assign(entry, { state: "bad", reason: `position ${position} was shown already (as ${known.code})` });
    } else if (inOrder && rec.next !== null && position !== rec.next) {
      Object.assign(entry, { state: "bad", reason: `position ${position} is not the next one of the shoe (${rec.next}): a skipped or reused position` });
    } else if (!this.available) {
      Object.assign(entry, { state: "unavailable", reason: UNAVAILABLE });
    }
    if (inOrder && Number.isInteger(position)) rec.next = position + 1;
    rec.seen.set(position, entry);
    this.check(rec, entry);
  }

  recheck(rec) {
    for (const entry of rec.seen.values()) this.check(rec, entry);
  }

  check(rec, entry) {
    if (entry.state !== "pending" || entry.running || rec.root === null || rec.size === null) return;
    entry.running = true;
    checkCard({ root: rec.root, size: rec.size, ...entry })
      .then(({ ok, reason }) => Object.assign(entry, { state: ok ? "ok" : "bad", reason: ok ? "" : reason }))
      .catch((error) => Object.assign(entry, { state: "bad", reason: `the check failed: ${error.message}` }))
      .finally(() => {
        entry.running = false;
        this.onChange?.();
      });
  }

  // Recompute a revealed shoe (the last one by default); the result is kept on its record.
  async verify(rec = this.revealed) {
    if (!rec) return null;
    rec.verification = { running: true, ok: null, text: "Verifying…" };
    this.onChange?.();
    const seen = [...rec.seen.values()];
    const bad = seen.find((e) => e.state === "bad");
    let result;
    try {
      result = await verifyShoe({ ...rec, seen });
      if (result.ok && bad) result = { ok: false, text: `Mismatch: position ${bad.position}, ${bad.code}: ${bad.reason}` };
    } catch (error) {
      result = { ok: false, text: `The shoe could not be verified: ${error.message}` };
    }
    rec.verification = { running: false, ...result };
    this.onChange?.();
    return rec.verification;
  }
}
