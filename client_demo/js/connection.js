// One WebSocket to the server speaking msgpack (baccarat.v1.msgpack), reopened with backoff.
//
// The connection knows nothing of tables: it delivers decoded messages and says when it is
// usable ("open" once the server's welcome arrived), not ("reconnecting"), or refused for good
// until someone acts ("refused": the server answered the handshake with a reason, e.g. 401 "a
// token is required"). A heartbeat ping every few seconds notices a silent, half-dead socket
// that the browser would keep for minutes.
//
// A browser's WebSocket API hides why a handshake failed (a 401 looks like a dead server), so
// after each failed open the page's `check` asks the same URL over plain HTTP and decides:
// "now" (try again at once, e.g. without a refused token), "stop" (refused: wait for the
// user) or anything else (the usual backoff).

const { encode, decode } = globalThis.MessagePack;

export const SUBPROTOCOL = "baccarat.v1.msgpack";

const FIRST_DELAY_MS = 300;
// At most 3 s (3.6 s with jitter) between attempts: a tab is back within 5 s of a restarted
// server answering.
const MAX_DELAY_MS = 3000;
const HEARTBEAT_MS = 5000;
const SILENCE_LIMIT_MS = 15000;

export function backoffDelay(attempt) {
  const base = Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** attempt);
  return Math.round(base * (0.8 + 0.4 * Math.random())); // jitter: tabs do not stampede
}

export class Connection {
  // url(): the WebSocket URL for the next attempt (it may change, e.g. a token dropped).
  constructor({ url, onMessage, onState, check }) {
    this.url = url;
    this.onMessage = onMessage;
    this.onState = onState;
    this.check = check;
    this.checks = 0; // a counter: a check answered after a newer attempt is ignored
    this.ws = null;
    this.state = "connecting";
    this.attempt = 0;
    this.timer = null;
    this.heartbeat = null;
    this.lastHeard = 0;
    this.pings = new Map(); // ref -> local send time, for the clock offset
    this.pingCount = 0;
    this.offsetMs = null; // server clock minus local clock
    this.rttMs = null;
    this.opens = 0;
  }

  start() {
    this._open();
  }

  get isOpen() {
    return this.state === "open" && this.ws !== null && this.ws.readyState === WebSocket.OPEN;
  }

  send(message) {
    if (this.ws === null || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(encode(message));
    return true;
  }

  // The welcome arrived: the connection is usable and the backoff starts over.
  markReady() {
    this.attempt = 0;
    this._setState("open", {});
  }

  // Start over at once (a new token to try): any wait or check under way is dropped.
  restart() {
    clearTimeout(this.timer);
    this.checks += 1;
    const ws = this.ws;
    this.ws = null;
    this._stopHeartbeat();
    if (ws !== null) {
      try {
        ws.close(4000, "reconnecting with another token");
      } catch {
        // a socket still connecting: it is dropped anyway
      }
    }
    this.attempt = 0;
    this._setState("connecting", {});
    this._open();
  }

  // Cut the socket now and reconnect as if it had dropped (tests and the heartbeat use it).
  drop(reason = "dropped by the page") {
    const ws = this.ws;
    if (ws === null) return;
    this._dropped(ws, true, { code: 4000, reason });
    try {
      ws.close(4000, reason.slice(0, 100));
    } catch {
      // closing a socket that is still connecting throws in some browsers; it is gone anyway
    }
  }

  _open() {
    this.timer = null;
    let ws;
    try {
      ws = new WebSocket(this.url(), SUBPROTOCOL);
    } catch (error) {
      this._dropped(null, false, { code: 0, reason: String(error) });
      return;
    }
    ws.binaryType = "arraybuffer";
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this.opens += 1;
      this.lastHeard = Date.now();
      this._startHeartbeat();
    };
    ws.onmessage = (event) => {
      if (ws !== this.ws) return;
      this.lastHeard = Date.now();
      let message;
      try {
        message =
          typeof event.data === "string"
            ? JSON.parse(event.data)
            : decode(new Uint8Array(event.data));
      } catch (error) {
        this.onMessage({ type: "error", code: "CLIENT_DECODE", message: String(error) });
        return;
      }
      if (message && message.type === "pong") this._pong(message);
      this.onMessage(message);
    };
    ws.onclose = (event) => this._dropped(ws, opened, event);
    ws.onerror = () => {}; // a close event always follows and says more
  }

  _dropped(ws, opened, event) {
    if (ws !== null && ws !== this.ws) return; // an old socket we already gave up on
    this.ws = null;
    this._stopHeartbeat();
    const delay = backoffDelay(this.attempt);
    this.attempt += 1;
    clearTimeout(this.timer);
    this.timer = null;
    const detail = { code: event.code, reason: event.reason || "", opened, retryInMs: delay };
    if (opened || !this.check) {
      this._setState("reconnecting", detail);
      this.timer = setTimeout(() => this._open(), delay);
      return;
    }
    // The socket never opened: ask over plain HTTP why before deciding when to try again.
    const ticket = ++this.checks;
    if (this.state !== "refused") this._setState("reconnecting", detail);
    Promise.resolve()
      .then(() => this.check(this.attempt))
      .catch(() => undefined)
      .then((verdict) => {
        if (ticket !== this.checks || this.ws !== null) return; // restarted meanwhile
        if (verdict === "stop") {
          this._setState("refused", detail);
          return;
        }
        if (this.state === "refused") this._setState("reconnecting", detail);
        this.timer = setTimeout(() => this._open(), verdict === "now" ? 0 : delay);
      });
  }

  _setState(state, detail) {
    this.state = state;
    this.onState(state, detail);
  }

  _startHeartbeat() {
    this._stopHeartbeat();
    this.heartbeat = setInterval(() => {
      if (Date.now() - this.lastHeard > SILENCE_LIMIT_MS) {
        this.drop("the server went silent");
        return;
      }
      this.ping();
    }, HEARTBEAT_MS);
  }

  _stopHeartbeat() {
    clearInterval(this.heartbeat);
    this.heartbeat = null;
    this.pings.clear();
  }

  ping() {
    this.pingCount += 1;
    const ref = `hb-${this.pingCount}`;
    if (this.send({ type: "ping", ref })) this.pings.set(ref, performance.now());
  }

  // pong.ts is the server's clock: estimate the offset at the middle of the round trip.
  _pong(message) {
    const sent = this.pings.get(message.ref);
    if (sent === undefined || typeof message.ts !== "number") return;
    this.pings.delete(message.ref);
    const rtt = performance.now() - sent;
    const offset = message.ts - (Date.now() - rtt / 2);
    if (this.rttMs === null || rtt <= this.rttMs * 1.5) {
      this.offsetMs = offset; // trust the quicker round trips
      this.rttMs = rtt;
    }
  }
}
