// The conversation: restored history, streamed answers, `xclaw uses [tool]` lines, notices and
// errors; and the composer (Enter sends, Shift+Enter starts a new line).

import { clear, foldedText, h, oneLine, richText } from "./dom.js";

const NEAR_BOTTOM_PX = 120;

export class Transcript {
  constructor(scroller, list) {
    this.scroller = scroller;
    this.list = list;
    this.live = null; // the assistant bubble receiving deltas
    this.workingWanted = false;
    this.liveText = "";
    this.tools = new Map(); // step id or call id -> tool line element
    this.pending = new Map(); // name:input -> a restored tool line still waiting (no step yet)
    // Thinking folds of the model call in flight, until anything else is shown: a call that
    // is retried after its thinking went out takes them back (`thinking_discarded`).
    this.callThinking = [];
    this.working = h("div.working", { hidden: true, "aria-hidden": "true" },
      h("span.dot"), h("span.dot"), h("span.dot"));
  }

  nearBottom() {
    const s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight < NEAR_BOTTOM_PX;
  }

  add(el, { force = false } = {}) {
    if (!el.classList.contains("thinking")) this.callThinking = [];
    const stick = force || this.nearBottom();
    this.list.insertBefore(el, this.working.parentNode === this.list ? this.working : null);
    if (this.working.parentNode !== this.list) this.list.append(this.working);
    if (stick) this.scrollToEnd();
    return el;
  }

  scrollToEnd() {
    requestAnimationFrame(() => { this.scroller.scrollTop = this.scroller.scrollHeight; });
  }

  reset() {
    clear(this.list);
    this.callThinking = [];
    this.live = null;
    this.liveText = "";
    this.tools.clear();
    this.pending.clear();
    this.list.append(this.working);
  }

  /** The "xclaw is working" dots: shown while a run is in flight and no text streams. */
  setWorking(on) {
    this.workingWanted = on;
    this.refreshWorking();
  }

  refreshWorking() {
    const stick = this.nearBottom();
    this.working.hidden = !this.workingWanted || this.live !== null;
    if (stick) this.scrollToEnd();
  }

  /** The `history` frame: the whole conversation so far, shown greyed as "restored". */
  renderHistory(messages, { sessionTitle = "", reason = "restored" } = {}) {
    this.reset();
    const items = messages || [];
    if (!items.length) {
      this.list.insertBefore(emptyState(sessionTitle), this.working);
      return;
    }
    const count = items.filter((m) => m.kind === "user" || (m.kind === "assistant" && m.text)).length;
    const label = reason === "rollback" ? "History after rollback" : "Restored history";
    this.add(h("div.divider.restored-start", h("span", { text: `${label} · ${count} message${count === 1 ? "" : "s"}` })));
    const byCall = new Map();
    for (const m of items) {
      if (m.kind === "user") this.add(userBubble(m.text, true, senderOf(m, this.me)));
      else if (m.kind === "summary") this.add(summaryFold(m.text));
      else if (m.kind === "assistant") {
        if ((m.thinking || []).length) this.add(thinkingFold(thinkingOf(m.thinking), true));
        if (m.text) this.add(assistantBubble(m.text, true));
        for (const call of m.tool_calls || []) {
          const line = toolLine({ name: call.name, input: call.input, state: "completed" }, true);
          Object.assign(line.dataset, { name: call.name, input: JSON.stringify(call.input) });
          byCall.set(call.id, line);
          this.add(line);
        }
      } else if (m.kind === "tool_result") {
        const line = byCall.get(m.tool_call_id);
        if (line && m.running) {
          // Still running or waiting for an approval on the server (a refresh is not a
          // crash): its live frames land on this line.
          setToolState(line, "running");
          if (m.stepId) {
            line.querySelector(".tool-step").textContent = m.stepId;
            this.tools.set(m.stepId, line);
          } else this.pending.set(callKey(line.dataset.name, line.dataset.input), line);
        } else if (line) setToolResult(line, m.is_error ? "failed" : "completed", m.content, m.stepId);
      }
    }
    this.add(h("div.divider.restored-end", h("span", { text: "live from here" })), { force: true });
  }

  user(text, sender = null) {
    this.endLive();
    this.list.querySelector(".empty-state")?.remove();
    return this.add(userBubble(text, false, sender), { force: true });
  }

  /** Show again what the page sent (or holds) after the conversation was drawn anew. */
  again(el) {
    this.list.querySelector(".empty-state")?.remove();
    this.add(el, { force: true });
  }

  delta(text) {
    if (!this.live) {
      this.liveText = "";
      this.live = this.add(assistantBubble("", false));
      this.live.classList.add("streaming");
      this.refreshWorking();
    }
    const stick = this.nearBottom();
    this.liveText += text;
    this.live.querySelector(".bubble-text").textContent = this.liveText;
    if (stick) this.scrollToEnd();
  }

  /** The turn's final answer: authoritative text, rendered with code blocks. */
  reply(text) {
    let bubble = this.live;
    if (!bubble && text) bubble = this.add(assistantBubble("", false));
    if (bubble) {
      const body = bubble.querySelector(".bubble-text");
      clear(body).append(richText(text || this.liveText));
      bubble.classList.remove("streaming");
      bubble.classList.add("final");
    }
    this.live = null;
    this.liveText = "";
    this.refreshWorking();
    this.scrollToEnd();
  }

  /** Close the streaming bubble (a tool call or an error follows it). */
  endLive() {
    if (this.live) {
      const body = this.live.querySelector(".bubble-text");
      clear(body).append(richText(this.liveText));
      this.live.classList.remove("streaming");
    }
    this.live = null;
    this.liveText = "";
    this.refreshWorking();
  }

  tool(frame) {
    this.endLive();
    const key = frame.stepId || `${frame.name}:${JSON.stringify(frame.input)}`;
    let line = this.tools.get(key);
    const waiting = callKey(frame.name, JSON.stringify(frame.input));
    if (!line && this.pending.has(waiting)) {
      line = this.pending.get(waiting);  // a restored call that was waiting: it starts now
      this.pending.delete(waiting);
      this.tools.set(key, line);
    }
    if (!line) {
      line = toolLine(frame, false);
      this.tools.set(key, line);
      this.add(line);
    }
    if (frame.state === "running") setToolState(line, "running");
    else setToolResult(line, frame.state, frame.output ?? "", frame.stepId);
  }

  /** The `thinking` frame: the model's reasoning, folded, before its answer streams. */
  thinking(frame) {
    this.endLive();
    this.callThinking.push(this.add(thinkingFold(frame, false)));
  }

  /** `thinking_discarded`: the call's attempt that showed them failed and is made again. */
  discardThinking() {
    for (const fold of this.callThinking) fold.remove();
    this.callThinking = [];
  }

  notice(text) {
    this.endLive();
    const kind = /^\[(\w+)\]/.exec(text || "")?.[1] || "info";
    this.add(h(`div.notice.notice-${kind}`, h("span.notice-icon", { "aria-hidden": "true", text: "ℹ" }), noticeText(text)));
  }

  error(text, code) {
    this.endLive();
    this.add(h("div.error-line", { role: "alert" },
      h("span.error-code", { text: code || "error" }),
      h("span", { text })), { force: true });
  }
}

/** A notice's text line by line, each with a hanging indent: a listing (/help, /steps,
 * /sessions) that wraps in a narrow column goes on under its own column. */
function noticeText(text) {
  const pre = h("pre");
  const lines = String(text || "").split("\n");
  lines.forEach((line, i) => {
    // The column: after the first run of two or more spaces that follows some text.
    const column = /^(\s*\S.*?\s{2,})\S/.exec(line);
    const lead = /^\s*/.exec(line)[0].length;
    const hang = column ? column[1].length : lead ? lead + 2 : 0;  // prose wraps flush left
    const el = h("span.notice-line", { text: line + (i < lines.length - 1 ? "\n" : "") });
    el.style.setProperty("--hang", `${Math.min(hang, 40)}ch`);
    pre.append(el);
  });
  return pre;
}

function callKey(name, inputJson) {
  return `${name}:${inputJson}`;
}

function emptyState(title) {
  return h("div.empty-state",
    h("div.empty-logo.logo", { "aria-hidden": "true" }),
    h("h2", { text: title || "A new session" }),
    h("p", { text: "Give xclaw a task. Every step is recorded before it happens, so you can refresh, " +
      "restart the server, roll back or fork at any point." }),
    h("p.muted", h("kbd", { text: "Enter" }), " sends · ", h("kbd", { text: "Shift" }), "+", h("kbd", { text: "Enter" }),
      " new line · ", h("code", { text: "/help" }), " lists commands"));
}

/** A user's message; `sender`: the team member who sent it, when it was not this page's
 * person (docs/teams.md). Text only, never markup. */
function userBubble(text, restored, sender = null) {
  const bubble = h("div.bubble", h("div.bubble-text", { text }));
  if (sender) bubble.prepend(h("span.sender", { text: sender }));
  return h(`div.msg.user${restored ? ".restored" : ""}`, bubble);
}

function assistantBubble(text, restored) {
  const body = h("div.bubble-text");
  if (text) body.append(richText(text));
  return h(`div.msg.assistant${restored ? ".restored" : ""}`,
    h("div.avatar.logo", { "aria-hidden": "true" }),
    h("div.bubble", body));
}

function thinkingOf(blocks) {
  return {
    content: blocks.map((b) => b.thinking || "").filter(Boolean).join("\n\n"),
    redacted: blocks.filter((b) => b.type === "redacted_thinking").length,
  };
}

/** Reasoning shown folded: a summary line with its size; opening it shows the text. */
function thinkingFold(frame, restored) {
  const text = String(frame.content || "");
  const words = text.trim() ? text.trim().split(/\s+/).length : 0;
  const bits = [];
  if (words) bits.push(`${words} word${words === 1 ? "" : "s"}`);
  if (frame.redacted) bits.push(`${frame.redacted} redacted`);
  return h(`details.thinking${restored ? ".restored" : ""}`,
    h("summary", { text: `Thinking${bits.length ? " · " + bits.join(" · ") : ""}` }),
    text ? h("pre.thinking-text", { text }) : h("p.muted", { text: "The provider sent this reasoning encrypted." }));
}

/** What /compact (or a full context window) put in place of the older turns, folded. */
function summaryFold(text) {
  return h("details.thinking.summary.restored",
    h("summary", { text: "Earlier conversation, summarised" }),
    h("pre.thinking-text", { text: String(text || "") }));
}

function toolLine(frame, restored) {
  const line = h(`div.tool-line${restored ? ".restored" : ""}`, { dataset: { state: frame.state || "running" } },
    h("div.tool-head",
      h("span.tool-state", { "aria-hidden": "true" }),
      h("span.tool-prefix", { text: "xclaw uses " }),
      h("span.tool-name", { text: `[${frame.name}]` }),
      h("span.tool-colon", { text: ": " }),
      h("code.tool-input", { text: oneLine(frame.input, 220), title: JSON.stringify(frame.input, null, 2) }),
      h("span.tool-step"),
      frame.agent ? h("span.tool-agent", { text: `sub-agent ${frame.agent}` }) : null),
    h("div.tool-output"));
  return line;
}

function setToolState(line, state) {
  line.dataset.state = state;
}

function setToolResult(line, state, output, stepId) {
  setToolState(line, state);
  if (stepId) line.querySelector(".tool-step").textContent = stepId;
  const box = clear(line.querySelector(".tool-output"));
  const text = String(output ?? "");
  if (!text.trim()) return;
  const lines = text.split("\n").length;
  if (lines === 1 && text.length <= 120) {
    // A one-line result reads best right under the call, without a box to open.
    box.append(h("div.tool-inline-output", h("span.arrow", { "aria-hidden": "true", text: "→ " }), h("code", { text })));
    return;
  }
  const details = h("details.tool-details",
    h("summary", { text: `${state === "failed" ? "error output" : "output"} · ${lines} line${lines === 1 ? "" : "s"}` }),
    foldedText(text, "code"));
  if (state === "failed" || lines <= 3) details.open = true;
  box.append(details);
}

/** The message box. `onSend(text)` is called with trimmed text; returns false to keep it. */
export class Composer {
  constructor(form, { onSend, onCancel, onQueue }) {
    this.form = form;
    this.input = form.querySelector("textarea");
    this.sendButton = form.querySelector(".send");
    this.stopButton = form.querySelector(".stop");
    this.queueButton = form.querySelector(".queue-send");
    this.state = form.querySelector(".composer-state");
    this.onSend = onSend;
    this.onQueue = onQueue;
    this.locked = false;
    this.offline = false;
    // While a run is in flight (not waiting for an approval), a message may still be sent
    // to wait its turn (docs/protocol.md, "Input while a run is busy").
    this.queueable = false;
    this.input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && e.altKey && !e.isComposing) {
        e.preventDefault();
        this.queue();
      } else if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.submit();
      }
    });
    if (this.queueButton) this.queueButton.addEventListener("click", () => this.queue());
    this.input.addEventListener("input", () => this.autosize());
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.submit();
    });
    this.stopButton.addEventListener("click", () => onCancel());
  }

  autosize() {
    this.input.style.height = "auto";
    this.input.style.height = `${Math.min(this.input.scrollHeight, 240)}px`;
  }

  submit() {
    if (this.locked || this.offline) return;
    const text = this.input.value.trim();
    if (!text) return;
    if (this.onSend(text) === false) return;
    this.input.value = "";
    this.autosize();
  }

  /** Queued: the text waits in the session's queue and runs after the run in flight. */
  queue() {
    if (!this.locked || !this.queueable || this.offline || !this.onQueue) return;
    const text = this.input.value.trim();
    if (!text) return;
    if (this.onQueue(text) === false) return;
    this.input.value = "";
    this.autosize();
  }

  /** Locked while a run is in flight: one driver per session (the server would say `busy`).
   * `queueable`: a message may still be queued meanwhile (the Queue button). */
  setLocked(locked, why = "", queueable = false) {
    this.locked = locked;
    this.queueable = locked && queueable;
    this.render(why);
  }

  setOffline(offline) {
    this.offline = offline;
    this.render();
  }

  render(why = "") {
    const blocked = this.locked || this.offline;
    this.form.classList.toggle("locked", blocked);
    this.sendButton.disabled = blocked;
    this.stopButton.hidden = !this.locked || this.offline;
    const queueing = Boolean(this.queueButton) && this.queueable && !this.offline;
    if (this.queueButton) this.queueButton.hidden = !queueing;
    // While a run is in flight Queue takes Send's place (the chat keeps its width).
    this.sendButton.hidden = queueing;
    this.input.setAttribute("aria-busy", this.locked ? "true" : "false");
    let text = "Enter to send · Shift+Enter for a new line · /help lists commands";
    if (this.offline) text = "Not connected — your message can be sent once xclaw is back";
    else if (this.locked && this.queueable) text = why || "xclaw is working — Queue (Alt+Enter) keeps a message for after this run · Stop ends it now";
    else if (this.locked) text = why || "xclaw is working — input is locked until the reply (Stop ends it now)";
    this.state.textContent = text;
  }

  /** Text that was not sent after all goes back into the box (before what is there now). */
  putBack(text) {
    const now = this.input.value;
    this.input.value = now.trim() ? `${text}\n${now}` : text;
    this.autosize();
  }

  focus() {
    this.input.focus();
  }
}


/** The session's waiting messages (a `queue` frame), a row each with a button that cancels
 * it (`onCancel(id)`); hidden when nothing waits. */
export class QueueList {
  constructor(el, { onCancel }) {
    this.el = el;
    this.onCancel = onCancel;
    this.entries = [];
    this.seen = new Map(); // id -> text of every message this session's queue listed
  }

  /** Was this message (its `messageId`) one that waited here? Its text, or null. */
  waited(id) { return this.seen.get(id) ?? null; }

  show(entries) {
    this.entries = Array.isArray(entries) ? entries : [];
    for (const q of this.entries) this.seen.set(q.id, q.content || "");
    this.el.hidden = this.entries.length === 0;
    const rows = this.entries.map((q, i) => h("div.queue-item", { role: "listitem", dataset: { id: q.id } },
      h("span.queue-n", { text: `${i + 1}` }),
      h("span.queue-mode", { text: q.busy || "queue", title: MODE_TITLES[q.busy] || "" }),
      h("span.queue-text", { text: q.content || "", title: q.content || "" }),
      q.user ? h("span.queue-user", { text: q.user }) : null,
      h("button.queue-cancel.icon", {
        type: "button", title: "Cancel this queued message", "aria-label": `Cancel queued message ${i + 1}`,
        text: "×", onclick: () => this.onCancel(q.id),
      })));
    this.el.replaceChildren(
      h("div.queue-head", { text: `Queued · ${this.entries.length} waiting` }), ...rows);
  }

  clear() {
    this.seen.clear();
    this.show([]);
  }
}

const MODE_TITLES = {
  queue: "runs after the run in flight",
  steer: "goes to the agent at its next tool call",
  interrupt: "the run is being stopped; this runs next",
};

/** Who a restored message is shown from: the schedule or webhook that fired it
 * (docs/schedules.md), another team member (docs/teams.md), or nobody named (you). */
function senderOf(m, me) {
  if (typeof m.fire === "string") return m.fire.startsWith("hook.") ? "webhook" : "schedule";
  return m.user && m.user !== me ? m.user : null;
}
