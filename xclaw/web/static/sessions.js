// The sessions sidebar: title, status and time of every session, forks nested under the
// session they branched from; switch, rename, delete, new.

import { clear, h, icon, shortId, timeAgo } from "./dom.js";

export function sessionTitle(s) {
  return (s && s.title) || `Untitled · ${shortId(s && s.sessionId)}`;
}

/** What a session is doing, in words: the server's rule (xclaw.store.steps.model.session_state,
 * docs/protocol.md "Session state") applied with this page's live knowledge of `busy`. */
export function sessionState(s) {
  const status = s && s.status;
  if (status === "Paused") return { key: "paused", text: "Paused · waiting for your approval" };
  if (s && s.busy) return { key: "running", text: "Running" };
  if (status === "Running") {
    // Waiting for a budget (docs/budgets.md): the server's words say which cap, spent, left.
    const budget = s.budgetText || (s.state === "budget" && s.stateText);
    if (s.awaitingInput && budget) return { key: "budget", text: budget };
    return s.awaitingInput
      ? { key: "waiting", text: "Waiting for your instruction" }
      : { key: "interrupted", text: "Interrupted · resumes when opened" };
  }
  if (status === "Init") {
    return s.isForked ? { key: "waiting", text: "Waiting for your instruction" } : { key: "new", text: "New" };
  }
  if (status === "Success") return { key: "success", text: "Success" };
  if (status === "Failed") return { key: "failed", text: "Failed" };
  return { key: "new", text: status || "New" };
}

/** Parent id -> child sessions, and the roots (no parent, or a parent no longer listed). */
export function forest(sessions) {
  const byId = new Map(sessions.map((s) => [s.sessionId, s]));
  const kids = new Map();
  const roots = [];
  for (const s of sessions) {
    if (s.parentSessionId && byId.has(s.parentSessionId)) {
      if (!kids.has(s.parentSessionId)) kids.set(s.parentSessionId, []);
      kids.get(s.parentSessionId).push(s);
    } else roots.push(s);
  }
  for (const list of kids.values()) list.sort((a, b) => a.createdAt - b.createdAt);
  return { byId, kids, roots };
}

/** Every session related to `id` by forking (the whole family tree it belongs to). */
export function familyOf(sessions, id) {
  const { byId, kids } = forest(sessions);
  let top = byId.get(id);
  if (!top) return [];
  while (top.parentSessionId && byId.has(top.parentSessionId)) top = byId.get(top.parentSessionId);
  const out = [];
  const walk = (s, depth) => {
    out.push({ session: s, depth });
    for (const c of kids.get(s.sessionId) || []) walk(c, depth + 1);
  };
  walk(top, 0);
  return out;
}

export class Sidebar {
  constructor(root, filterInput, actions) {
    this.root = root;
    this.filter = filterInput;
    this.actions = actions;
    this.sessions = [];
    this.current = null;
    this.filter.addEventListener("input", () => this.render());
    setInterval(() => this.render(), 30_000); // keep "5 min ago" honest
  }

  setSessions(sessions) {
    this.sessions = sessions;
    this.render();
  }

  setCurrent(id) {
    this.current = id;
    this.render();
  }

  /** Patch one session in place (a status frame, a rename) without a round trip. */
  patch(id, changes) {
    const s = this.sessions.find((x) => x.sessionId === id);
    if (s) {
      Object.assign(s, changes);
      this.render();
    }
  }

  get(id) {
    return this.sessions.find((s) => s.sessionId === id) || null;
  }

  render() {
    const needle = this.filter.value.trim().toLowerCase();
    // Rebuild only when something visible changed: a rebuild under the pointer or the
    // keyboard focus would drop the hover actions and the focus.
    const signature = JSON.stringify([needle, this.current, Math.floor(Date.now() / 30_000),
      this.sessions.map((s) => [s.sessionId, s.title, s.status, s.busy, s.awaitingInput, s.updatedAt, s.parentSessionId, s.forkedFromSeq])]);
    if (signature === this.signature) return;
    this.signature = signature;
    const focused = document.activeElement;
    const focusKey = this.root.contains(focused)
      ? [focused.closest(".session-item")?.dataset.session, focused.className]
      : null;
    const { kids, roots } = forest(this.sessions);
    roots.sort((a, b) => (b.updatedAt || 0) - (a.updatedAt || 0));
    clear(this.root);
    const matches = (s) =>
      !needle || sessionTitle(s).toLowerCase().includes(needle) || s.sessionId.toLowerCase().startsWith(needle);
    const visible = (s) => matches(s) || (kids.get(s.sessionId) || []).some(visible);
    let shown = 0;
    const list = h("ul.session-list", { role: "list" });
    const add = (s, depth, into) => {
      if (!visible(s)) return;
      shown += 1;
      const li = this.item(s, depth);
      into.append(li);
      const children = kids.get(s.sessionId) || [];
      if (children.length) {
        const sub = h("ul.forks", { role: "list" });
        for (const c of children) add(c, depth + 1, sub);
        li.append(sub);
      }
    };
    for (const s of roots) add(s, 0, list);
    this.root.append(list);
    if (!shown) {
      this.root.append(h("p.sidebar-empty", { text: needle ? "No session matches." : "No sessions yet." }));
    }
    if (focusKey && focusKey[0]) {
      const item = this.root.querySelector(`.session-item[data-session="${CSS.escape(focusKey[0])}"]`);
      const again = [...(item?.querySelector(".session-row")?.querySelectorAll("button") || [])]
        .find((b) => b.className === focusKey[1]);
      again?.focus();
    }
  }

  item(s, depth) {
    const active = s.sessionId === this.current;
    const from = s.isForked && s.forkedFromSeq ? `from s${String(s.forkedFromSeq).padStart(4, "0")}` : "";
    const st = sessionState(s);
    const meta = [st.text, from].filter(Boolean).join(" · ");
    return h(`li.session-item${active ? ".active" : ""}${s.isForked ? ".fork" : ""}`, { dataset: { session: s.sessionId } },
      h("div.session-row",
        h("button.session-main", {
          type: "button",
          "aria-current": active ? "true" : undefined,
          title: `${sessionTitle(s)}\n${s.sessionId}\n${st.text}`,
          onclick: () => this.actions.onSwitch(s.sessionId),
        },
        h(`span.status-dot.st-${st.key}`, { "aria-hidden": "true" }),
        h("span.session-text",
          h("span.session-line",
            h("span.session-title", s.isForked ? h("span.fork-mark", { title: "fork" }, icon("fork", { size: 12 })) : null, sessionTitle(s)),
            h("span.session-time", { text: timeAgo(s.updatedAt) })),
          h("span.session-meta", { text: meta }))),
        h("div.session-actions",
          h("button.icon.rename", { type: "button", title: "Rename", "aria-label": `Rename ${sessionTitle(s)}`,
            onclick: () => this.actions.onRename(s) }, icon("pencil", { size: 14 })),
          h("button.icon.delete", { type: "button", title: "Delete", "aria-label": `Delete ${sessionTitle(s)}`,
            onclick: () => this.actions.onDelete(s) }, icon("trash", { size: 14 })))));
  }
}
