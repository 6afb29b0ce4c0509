// One WebSocket to the gateway that comes back by itself.
//
// The server may be killed and restarted at any moment (that is the point of xclaw), so a
// dropped socket is normal: wait (250 ms, doubling to 8 s, with jitter so many tabs do not
// reconnect in lock-step), open again, and let the owner send `reconnect` from onOpen. Close
// code 4401 means the token is wrong: retrying cannot help, so it stops and says so.
//
// settled() tells when the gateway has finished with everything sent so far: it handles a
// socket's frames one after another and answers each `ping` in turn, so the `pong` of a ping
// sent now comes after every answer to what was sent before it.

const CLOSE_UNAUTHORIZED = 4401;
const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 8000;
const PING_EVERY_MS = 20_000;

export class Socket {
  /**
   * @param {() => string} url   called on every attempt (the token may have changed)
   * @param {{onOpen, onFrame, onState, onUnauthorized}} handlers
   */
  constructor(url, handlers) {
    this.url = url;
    this.handlers = handlers;
    this.ws = null;
    this.attempt = 0;
    this.timer = null;
    this.pinger = null;
    this.stopped = false;
    this.retryAt = 0;
    this.pings = 0; // pings sent on the open socket
    this.pongs = 0; // pongs received on it
    this.waiters = []; // {n, resolve}: settled() calls waiting for the pong of ping n
  }

  get open() {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN;
  }

  connect() {
    this.stopped = false;
    clearTimeout(this.timer);
    this.handlers.onState?.("connecting", this.attempt);
    let ws;
    try {
      ws = new WebSocket(this.url());
    } catch (e) {
      this.scheduleRetry();
      return;
    }
    this.ws = ws;
    let unauthorized = false;
    ws.addEventListener("open", () => {
      this.attempt = 0;
      this.pings = 0;
      this.pongs = 0;
      this.handlers.onState?.("open", 0);
      clearInterval(this.pinger);
      this.pinger = setInterval(() => this.send({ type: "ping" }), PING_EVERY_MS);
      this.handlers.onOpen?.();
    });
    ws.addEventListener("message", (event) => {
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch (e) {
        return; // the server only sends JSON; ignore anything else
      }
      if (frame && frame.type === "error" && frame.code === "unauthorized") unauthorized = true;
      this.handlers.onFrame?.(frame);
      if (frame && frame.type === "pong") this.ponged();
    });
    ws.addEventListener("close", (event) => {
      if (this.ws !== ws) return;
      this.ws = null;
      clearInterval(this.pinger);
      this.dropWaiters();
      if (event.code === CLOSE_UNAUTHORIZED || unauthorized) {
        this.stopped = true;
        this.handlers.onState?.("unauthorized", 0);
        this.handlers.onUnauthorized?.();
        return;
      }
      if (!this.stopped) this.scheduleRetry();
    });
  }

  scheduleRetry() {
    const base = Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** this.attempt);
    const delay = Math.round(base * (0.75 + Math.random() * 0.5));
    this.attempt += 1;
    this.retryAt = Date.now() + delay;
    this.handlers.onState?.("waiting", this.attempt, delay);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  /** Try again now (the "reconnect now" button, or the tab coming back online). */
  retryNow() {
    if (this.open || this.stopped) return;
    clearTimeout(this.timer);
    this.connect();
  }

  send(frame) {
    if (!this.open) return false;
    this.ws.send(JSON.stringify(frame));
    if (frame.type === "ping") this.pings += 1;
    return true;
  }

  /** Resolves true once the gateway has answered everything sent on this socket before the
   * call, false if the socket closes first (its answers may then never come). */
  settled() {
    if (!this.send({ type: "ping" })) return Promise.resolve(false);
    const n = this.pings;
    return new Promise((resolve) => this.waiters.push({ n, resolve }));
  }

  ponged() {
    this.pongs += 1;
    const done = this.waiters.filter((w) => w.n <= this.pongs);
    this.waiters = this.waiters.filter((w) => w.n > this.pongs);
    for (const w of done) w.resolve(true);
  }

  dropWaiters() {
    const dropped = this.waiters;
    this.waiters = [];
    for (const w of dropped) w.resolve(false);
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.pinger);
    this.dropWaiters();
    if (this.ws) this.ws.close(1000, "bye");
    this.ws = null;
  }
}
