// The live trace tree ("the audit record for people"): every step of the session under the
// step that caused it — user input → LLM call → tool calls → sub-agents — with type, name,
// status, duration and tokens; a step opens to show its input and output; `step` frames
// update it while the agent runs.

import { clear, formatCost, formatCount, formatDuration, formatTokens, h, icon, isEstimated, oneLine, prettyValue, tokensOf } from "./dom.js";

const TYPE_LABEL = { user_input: "user", llm_call: "llm", tool_call: "tool", system_alert: "alert" };

export class TraceTree {
  /** @param {{onRollback(step), onFork(step)}} actions */
  constructor(root, stats, actions) {
    this.root = root;
    this.stats = stats;
    this.actions = actions;
    this.steps = new Map(); // display id -> step
    this.collapsed = new Set();
    this.open = new Set();
    this.busy = false;
    this.pending = false;
    this.root.addEventListener("keydown", (e) => this.onKey(e));
  }

  /** Replace the steps with a fetched tree. `since`: when the fetch started — live `step`
   * frames that arrived after that are newer than the response and win over it. */
  load(tree, since = Infinity) {
    const live = [...this.steps.values()].filter((s) => s._at > since);
    this.steps.clear();
    const walk = (nodes) => {
      for (const node of nodes || []) {
        const { children, ...step } = node;
        this.steps.set(step.id, step);
        walk(children);
      }
    };
    walk(tree);
    for (const s of live) this.steps.set(s.id, s);
    this.open = new Set([...this.open].filter((id) => this.steps.has(id)));
    this.render();
  }

  clearAll() {
    this.steps.clear();
    this.open.clear();
    this.collapsed.clear();
    this.render();
  }

  upsert(step) {
    this.steps.set(step.id, { ...this.steps.get(step.id), ...step, _at: performance.now() });
    this.schedule();
  }

  setBusy(busy) {
    if (this.busy === busy) return;
    this.busy = busy;
    this.schedule();
  }

  /** Steps at or after `step` (what a rollback to before it deletes). */
  stepsFrom(step) {
    return [...this.steps.values()].filter((s) => s.seq >= step.seq).sort((a, b) => a.seq - b.seq);
  }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.render();
    });
  }

  children() {
    const kids = new Map();
    const roots = [];
    const ordered = [...this.steps.values()].sort((a, b) => a.seq - b.seq);
    for (const s of ordered) {
      if (s.parent && this.steps.has(s.parent)) {
        if (!kids.has(s.parent)) kids.set(s.parent, []);
        kids.get(s.parent).push(s);
      } else roots.push(s);
    }
    return { roots, kids };
  }

  render() {
    const focused = document.activeElement?.closest?.(".trace-row")?.parentNode?.dataset.step;
    const scroll = this.root.scrollTop;
    const { roots, kids } = this.children();
    clear(this.root);
    if (!roots.length) {
      this.root.append(h("div.trace-empty",
        h("p", { text: "No steps yet." }),
        h("p.muted", { text: "Each user message, LLM call, tool call and approval appears here as it is recorded." })));
    } else {
      const tree = h("div.tree", { role: "tree", "aria-label": "trace tree" });
      for (const s of roots) tree.append(this.node(s, kids, 1));
      this.root.append(tree);
    }
    this.root.scrollTop = scroll;
    this.renderStats();
    if (focused) this.root.querySelector(`[data-step="${focused}"] > .trace-row`)?.focus();
  }

  renderStats() {
    const all = [...this.steps.values()];
    const tokens = all.reduce((n, s) => n + tokensOf(s), 0);
    const llm = all.filter((s) => s.type === "llm_call").length;
    const tools = all.filter((s) => s.type === "tool_call").length;
    const running = all.some((s) => s.status === "running");
    const priced = all.filter((s) => typeof s.cost === "number");
    const cost = priced.reduce((n, s) => n + s.cost, 0);
    const input = all.reduce((n, s) => n + (s.usage?.input || 0), 0);
    const read = all.reduce((n, s) => n + (s.usage?.cache_read || 0), 0);
    clear(this.stats).append(...[
      h("span", { text: `${all.length} step${all.length === 1 ? "" : "s"}` }),
      h("span", { text: `${llm} LLM · ${tools} tool` }),
      h("span", all.some(isEstimated)
        ? { text: `~${formatCount(tokens)} tokens`, title: "partly estimated: the server reported no token counts for some calls" }
        : { text: `${formatCount(tokens)} tokens` }),
      read ? h("span", { text: `${Math.round((100 * read) / Math.max(1, input))}% cached`, title: "share of input tokens read from the prompt cache" }) : null,
      priced.length ? h("span.cost", { text: `≈ ${formatCost(cost)}`, title: "estimated cost of the LLM calls (price table)" }) : null,
      running ? h("span.live-dot", { text: "● live" }) : null,
    ].filter(Boolean));
  }

  node(step, kids, depth) {
    const children = kids.get(step.id) || [];
    const hasKids = children.length > 0;
    const collapsed = this.collapsed.has(step.id);
    const open = this.open.has(step.id);
    const failed = step.status === "failed";
    const row = h("div.trace-row", {
      role: "treeitem",
      tabindex: "0",
      "aria-level": depth,
      "aria-expanded": hasKids ? String(!collapsed) : undefined,
      "aria-selected": open ? "true" : "false",
      title: `${step.id} · ${step.type} · ${step.status}`,
      onclick: (e) => {
        if (e.target.closest(".twisty")) return;
        this.toggleOpen(step.id);
      },
    },
    hasKids
      ? h("button.twisty", { type: "button", tabindex: "-1", "aria-label": collapsed ? "expand" : "collapse",
          text: collapsed ? "▸" : "▾", onclick: () => this.toggleCollapsed(step.id) })
      : h("span.twisty.leaf", { "aria-hidden": "true" }),
    h(`span.badge.type-${step.type}`, { text: TYPE_LABEL[step.type] || step.type }),
    h("span.step-name", { text: displayName(step), title: step.name }),
    h("span.step-meta",
      h(`span.status-icon.st-${step.status}${step.error === "interrupted" ? ".interrupted" : ""}`, {
        title: step.error === "interrupted" ? "interrupted" : step.status, "aria-label": step.status,
      }),
      h("span.step-dur", { text: step.status === "running" ? "running" : formatDuration(step.durationMs) }),
      h("span.step-id", { text: step.id })),
    h("span.step-summary", { text: summary(step), title: summary(step) }),
    h("span.step-tok", { text: formatTokens(step) }));
    const interrupted = step.error === "interrupted";
    const el = h(`div.trace-node${failed ? (interrupted ? ".interrupted" : ".failed") : ""}`, { dataset: { step: step.id, type: step.type, status: step.status } }, row);
    if (open) el.append(this.detail(step));
    if (hasKids && !collapsed) {
      const group = h("div.trace-children", { role: "group" });
      for (const c of children) group.append(this.node(c, kids, depth + 1));
      el.append(group);
    } else if (hasKids) {
      el.append(h("div.trace-collapsed", { text: `${countDescendants(step.id, kids)} hidden` }));
    }
    return el;
  }

  detail(step) {
    const tokens = step.tokens || {};
    const started = step.startTime ? new Date(step.startTime).toLocaleTimeString() : "";
    return h("div.trace-detail",
      h("dl.step-facts",
        fact("step", `${step.id}${step.parent ? ` (under ${step.parent})` : ""}`),
        fact("type", step.type),
        fact("status", step.error === "interrupted" ? "failed (interrupted)" : step.status),
        step.agent && step.agent !== "main" ? fact("agent", step.agent) : null,
        fact("started", started),
        fact("duration", step.durationMs === null || step.durationMs === undefined ? "running" : formatDuration(step.durationMs)),
        isEstimated(step)
          ? fact("tokens", `~${step.usage.input || 0} prompt · ~${step.usage.output || 0} completion (estimated: the server reported no counts)`)
          : tokens.prompt || tokens.completion ? fact("tokens", `${tokens.prompt || 0} prompt · ${tokens.completion || 0} completion`) : null,
        step.name === "approval" && step.output && step.output.by ? fact("answered by", answeredBy(step.output.by)) : null,
        (step.name === "compensation" || step.name === "rollback") && step.input && step.input.by
          ? fact("asked by", answeredBy(step.input.by)) : null,
        step.type === "tool_call" ? this.undoneBy(step) : null,
        step.type === "user_input" && step.output && step.output.by ? fact("sent by", answeredBy(step.output.by)) : null),
      h("div.io", h("div.io-label", { text: "input" }), prettyValue(step.input)),
      h("div.io", h("div.io-label", { text: "output" }), prettyValue(step.output)),
      step.error ? h("div.io.io-error", h("div.io-label", { text: "error" }), prettyValue(step.error)) : null,
      h("div.step-actions",
        h("button.small.ghost.danger-text.rollback-btn", {
          type: "button",
          disabled: this.busy || undefined,
          title: this.busy ? "wait for the run to finish (or stop it) before rolling back" : `delete ${step.id} and every later step, workspace included`,
          onclick: () => this.actions.onRollback(step),
        }, icon("rollback", { size: 14 }), "Roll back to before"),
        h("button.small.ghost.fork-btn", {
          type: "button",
          title: `a new session with the history up to and including ${step.id}; this one stays as it is`,
          onclick: () => this.actions.onFork(step),
        }, icon("fork", { size: 14 }), "Fork from here")));
  }

  /** For a call whose outside effect a rollback's compensation undid (or tried to): which. */
  undoneBy(step) {
    const comps = [...this.steps.values()].filter((s) => s.type === "system_alert" && s.name === "compensation"
      && s.input && s.input.effect === step.id);
    if (!comps.length) return null;
    return fact("undone by", comps.map((c) => `${c.id} (${c.error === "interrupted" ? "interrupted" : c.status})`).join(", "));
  }

  toggleOpen(id) {
    if (this.open.has(id)) this.open.delete(id);
    else this.open.add(id);
    this.render();
  }

  toggleCollapsed(id) {
    if (this.collapsed.has(id)) this.collapsed.delete(id);
    else this.collapsed.add(id);
    this.render();
  }

  setAllCollapsed(collapse) {
    const { kids } = this.children();
    this.collapsed = collapse ? new Set(kids.keys()) : new Set();
    this.render();
  }

  onKey(e) {
    const row = e.target.closest?.(".trace-row");
    if (!row) return;
    const id = row.parentNode.dataset.step;
    const rows = [...this.root.querySelectorAll(".trace-row")];
    const i = rows.indexOf(row);
    if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      this.toggleOpen(id);
    } else if (e.key === "ArrowDown" && i < rows.length - 1) {
      e.preventDefault();
      rows[i + 1].focus();
    } else if (e.key === "ArrowUp" && i > 0) {
      e.preventDefault();
      rows[i - 1].focus();
    } else if (e.key === "ArrowLeft" && row.getAttribute("aria-expanded") === "true") {
      this.toggleCollapsed(id);
    } else if (e.key === "ArrowRight" && row.getAttribute("aria-expanded") === "false") {
      this.toggleCollapsed(id);
    }
  }
}

/** Model names can be long paths (script:/tmp/…/script.json): show the last part. */
export function displayName(step) {
  const name = String(step.name ?? "");
  // A message a team member sent: their name (docs/teams.md).
  const sender = step.type === "user_input" ? step.output?.by?.user : null;
  if (sender) return String(sender);
  if (step.type === "llm_call" && name.includes("/")) {
    const [kind, rest] = name.includes(":") ? [name.slice(0, name.indexOf(":") + 1), name.slice(name.indexOf(":") + 1)] : ["", name];
    return kind + rest.split("/").filter(Boolean).pop();
  }
  return name;
}

const CLIENTS = { chat: "xclaw chat", web: "web page", api: "HTTP API", run: "xclaw run prompt" };

/** Who or what answered an approval, from its recorded `by` (xclaw/people/answered_by.py). */
export function answeredBy(by) {
  switch (by.kind) {
    case "person": {
      const client = by.client ? CLIENTS[by.client] || by.client : "a client that gave no name";
      const who = by.user ? String(by.user) : "a person";
      return `${who} · ${client}${by.via ? ` (${by.via})` : ""}`;
    }
    case "no_terminal": return "nobody: no terminal to ask";
    case "timeout": return `nobody: timed out${by.detail ? ` after ${by.detail}` : ""}`;
    case "cancel": return "the run was cancelled";
    case "new_input": return "a new message came instead";
    case "run_ended": return "the run ended while it waited";
    case "replay": return `xclaw replay${by.detail ? ` of ${by.detail}` : ""}`;
    default: return String(by.kind);
  }
}

function fact(label, value) {
  return [h("dt", { text: label }), h("dd", { text: value })];
}

function countDescendants(id, kids) {
  let n = 0;
  for (const c of kids.get(id) || []) n += 1 + countDescendants(c.id, kids);
  return n;
}

/** One line saying what the step was about. */
export function summary(step) {
  const out = step.output;
  switch (step.type) {
    case "user_input":
      return oneLine(step.input, 120);
    case "llm_call": {
      if (step.status === "running") return "thinking…";
      if (!out || typeof out !== "object") return step.error ? oneLine(step.error, 100) : "";
      const calls = (out.tool_calls || []).map((c) => c.name);
      const text = out.text ? oneLine(out.text, 90) : "";
      if (calls.length) return `${text ? text + " " : ""}→ ${calls.join(", ")}`;
      return text;
    }
    case "tool_call": {
      const input = step.input && typeof step.input === "object" ? step.input.command ?? step.input.path ?? step.input : step.input;
      return oneLine(input, 110);
    }
    case "system_alert": {
      const input = step.input || {};
      if (step.name === "approval") {
        // `why` says who answered when the record has `by` (docs/approval.md, Who decided).
        const verdict = step.status === "running" ? "waiting for you"
          : out && out.by && out.why ? out.why
          : out && out.approved ? "approved" : (out && out.why) || "denied";  // why: "cancelled by the user"
        return `${input.tool || "tool"} — ${verdict}`;
      }
      if (step.name === "session_config") {  // a worker and the session's own configuration
        const runs = (c) => (c ? `${(c.models || []).join(", ")} · ${c.approval}` : "?");
        const worker = input.worker || {};
        const used = input.decision !== "refused" && input.used ? ` → ran with ${runs(input.used)}` : "";
        return `${input.decision}: session ${runs(input.session)}; worker ${worker.id} ${runs(worker)}${used}`;
      }
      if (step.name === "compensation") {  // a rollback undoing an outside effect (docs/workspace.md)
        const state = step.status === "running" ? "undoing…" : step.status === "completed" ? "undone"
          : step.error === "interrupted" ? "cut short" : "FAILED";
        return `${state}: ${input.effect || "?"} ${input.tool || "tool"} by ${input.action || "?"}`;
      }
      if (step.name === "rollback") {  // a rollback's plan: what it undoes, what it leaves done
        const undo = (input.compensations || []).length, stay = (input.notUndone || []).length;
        const state = step.status === "running" ? "in progress" : step.status === "completed" ? "done" : "abandoned";
        return `to before ${input.stepId || "?"} (${state}): ${undo} to undo${stay ? `, ${stay} left done` : ""}`;
      }
      if (step.name === "settle_check") {  // an interrupted call's outcome, found by evidence
        return `${input.stepId || "?"} ${input.tool || "tool"}: ${String(input.outcome || "?").replace("_", " ")} — ${input.detail || ""}`;
      }
      if (step.name === "outside_effects") {
        return `${input.tool || "tool"} reaches outside the workspace${input.effect ? ` (${input.effect})` : ""}`;
      }
      if (step.name === "resume") {
        const parts = [];
        if ((input.interrupted || []).length) parts.push(`interrupted ${input.interrupted.join(", ")}`);
        if ((input.retrying || []).length) parts.push(`retrying ${input.retrying.join(", ")}`);
        if ((input.mayHaveRun || []).length) parts.push(`may have run ${input.mayHaveRun.join(", ")}`);
        return parts.join(" · ") || "resumed after a restart";
      }
      return oneLine(input, 100);
    }
    default:
      return "";
  }
}
