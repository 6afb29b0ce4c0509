// Branch comparison (R12: "the two paths can be compared side by side"): two sessions of one
// fork family, from the point where they part: steps, answers, tool outputs, duration and
// tokens, with the differences marked.
//
// Forks keep the sequence numbers of the steps they copy, so after the fork point row k of
// the comparison is step s(fork+k) on both sides.

import { sessionsApi } from "./api.js";
import { clear, formatCount, formatDuration, h, icon, oneLine, prettyValue, stableJson, tokensOf } from "./dom.js";
import { familyOf, forest, sessionTitle } from "./sessions.js";
import { displayName, summary } from "./trace.js";

const TYPE_LABEL = { user_input: "user", llm_call: "llm", tool_call: "tool", system_alert: "alert" };

/** The last sequence number both sessions share (their common history ends there). */
export function forkPoint(sessions, a, b) {
  const { byId } = forest(sessions);
  const chain = (id) => {
    const out = [];
    let s = byId.get(id);
    while (s) {
      out.push(s);
      s = s.parentSessionId ? byId.get(s.parentSessionId) : null;
    }
    return out;
  };
  const ca = chain(a);
  const cb = chain(b);
  const common = ca.find((s) => cb.some((t) => t.sessionId === s.sessionId));
  if (!common) return 0;
  // How far a side still follows the common ancestor: all of it (it *is* the ancestor),
  // or up to the step where its own line branched off.
  const reach = (c) => {
    if (c[0].sessionId === common.sessionId) return Infinity;
    const i = c.findIndex((s) => s.sessionId === common.sessionId);
    let seq = c[i - 1].forkedFromSeq ?? 0;
    // A fork of a fork cannot reach past any fork point on its way down.
    for (let j = i - 2; j >= 0; j--) seq = Math.min(seq, c[j].forkedFromSeq ?? 0);
    return seq;
  };
  const p = Math.min(reach(ca), reach(cb));
  return Number.isFinite(p) ? p : 0;
}

/** What must be equal for two steps at the same place to count as "the same". */
function content(step) {
  if (!step) return null;
  let output = step.output;
  if (step.type === "llm_call" && output && typeof output === "object") {
    output = { text: output.text || "", calls: (output.tool_calls || []).map((c) => [c.name, c.input]) };
  }
  return {
    head: stableJson([step.type, step.name]),
    input: stableJson(step.input),
    output: stableJson(output),
    status: step.status,
  };
}

function finalAnswer(steps) {
  for (let i = steps.length - 1; i >= 0; i--) {
    const s = steps[i];
    if (s.type === "llm_call" && s.output && typeof s.output === "object" && s.agent === "main" &&
        !(s.output.tool_calls || []).length) return s.output.text || "";
  }
  return null;
}

function totals(steps) {
  return {
    steps: steps.length,
    duration: steps.reduce((n, s) => n + (s.durationMs || 0), 0),
    tokens: steps.reduce((n, s) => n + tokensOf(s), 0),
    tools: steps.filter((s) => s.type === "tool_call").length,
  };
}

export class CompareView {
  constructor(root, { onClose, onSwitch, onError }) {
    this.root = root;
    this.onClose = onClose;
    this.onSwitch = onSwitch;
    this.onError = onError;
    this.sessions = [];
    this.left = null;
    this.right = null;
  }

  /** Open for the family of `currentId`, with a sensible pair chosen. */
  async open(sessions, currentId) {
    this.sessions = sessions;
    const family = familyOf(sessions, currentId).map((f) => f.session);
    const current = family.find((s) => s.sessionId === currentId);
    if (current && current.parentSessionId && family.some((s) => s.sessionId === current.parentSessionId)) {
      this.left = current.parentSessionId;
      this.right = currentId;
    } else {
      const kids = family.filter((s) => s.parentSessionId === currentId).sort((a, b) => b.createdAt - a.createdAt);
      this.left = currentId;
      this.right = kids[0]?.sessionId ?? family.find((s) => s.sessionId !== currentId)?.sessionId ?? currentId;
    }
    this.root.hidden = false;
    await this.render();
  }

  close() {
    this.root.hidden = true;
    clear(this.root);
  }

  picker(which, family) {
    const select = h("select.branch-select", {
      "aria-label": which === "left" ? "left branch" : "right branch",
      onchange: (e) => {
        this[which] = e.target.value;
        this.render();
      },
    });
    for (const { session: s, depth } of family) {
      const opt = h("option", { value: s.sessionId, text: `${"  ".repeat(depth)}${depth ? "⤷ " : ""}${sessionTitle(s)} — ${s.status}` });
      if (s.sessionId === this[which]) opt.selected = true;
      select.append(opt);
    }
    return select;
  }

  async render() {
    const family = familyOf(this.sessions, this.left);
    const head = h("div.compare-head",
      h("button.ghost.back", { type: "button", onclick: () => this.onClose() }, icon("back", { size: 14 }), "Back to chat"),
      h("h2", { text: "Compare branches" }),
      h("div.compare-pickers",
        this.picker("left", family),
        h("button.icon.swap", { type: "button", title: "swap sides", "aria-label": "swap sides", text: "⇄",
          onclick: () => { [this.left, this.right] = [this.right, this.left]; this.render(); } }),
        this.picker("right", family)));
    clear(this.root).append(head, h("div.compare-loading", { text: "Loading both branches…" }));
    let leftSteps;
    let rightSteps;
    try {
      [leftSteps, rightSteps] = await Promise.all([sessionsApi.steps(this.left), sessionsApi.steps(this.right)]);
    } catch (e) {
      this.onError(e);
      return;
    }
    this.root.querySelector(".compare-loading")?.remove();
    const fork = this.left === this.right ? 0 : forkPoint(this.sessions, this.left, this.right);
    const shared = leftSteps.filter((s) => s.seq <= fork);
    const a = leftSteps.filter((s) => s.seq > fork);
    const b = rightSteps.filter((s) => s.seq > fork);
    const body = h("div.compare-body");
    if (this.left === this.right) body.append(h("p.compare-note", { text: "Both sides show the same session: pick another branch on one side." }));
    body.append(this.summaryRow(a, b, fork));
    body.append(this.sharedBlock(shared, fork));
    body.append(this.rows(a, b, fork));
    this.root.append(body);
  }

  summaryRow(a, b, fork) {
    const card = (id, steps, other) => {
      const s = this.sessions.find((x) => x.sessionId === id) || { sessionId: id, status: "?" };
      const t = totals(steps);
      const o = totals(other);
      const answer = finalAnswer(steps);
      const otherAnswer = finalAnswer(other);
      const diff = (x, y) => (x !== y ? ".differs" : "");
      return h("div.compare-card", { dataset: { session: id } },
        h("div.compare-card-head",
          h(`span.status-dot.st-${s.status}`, { "aria-hidden": "true" }),
          h("strong", { text: sessionTitle(s) }),
          h("span.muted.mono", { text: id.slice(0, 10) }),
          h("button.linkish.small", { type: "button", text: "open", onclick: () => this.onSwitch(id) })),
        h("div.compare-figures",
          h(`span${diff(t.steps, o.steps)}`, { text: `${t.steps} steps after the fork` }),
          h(`span${diff(t.tools, o.tools)}`, { text: `${t.tools} tool call${t.tools === 1 ? "" : "s"}` }),
          h("span", { text: formatDuration(t.duration) || "0 ms" }),
          h(`span${diff(t.tokens, o.tokens)}`, { text: `${formatCount(t.tokens)} tokens` })),
        h(`div.compare-answer${answer !== otherAnswer ? ".differs" : ""}`,
          h("div.io-label", { text: answer === null ? "no final answer after the fork" : "final answer" }),
          answer === null ? null : h("div.answer-text", { text: answer })));
    };
    return h("div.compare-grid.compare-summary",
      card(this.left, a, b),
      h("div.gutter"),
      card(this.right, b, a));
  }

  sharedBlock(shared, fork) {
    if (!fork) return h("p.compare-note", { text: "These sessions share no steps." });
    return h("details.compare-shared",
      h("summary", { text: `Shared history: s0001–s${String(fork).padStart(4, "0")} (${shared.length} steps, identical on both sides)` }),
      h("ol.shared-list", shared.map((s) => h("li",
        h(`span.badge.type-${s.type}`, { text: TYPE_LABEL[s.type] || s.type }),
        h("span.step-id", { text: s.id }),
        h("span", { text: `${displayName(s)} — ${summary(s)}` })))));
  }

  rows(a, b, fork) {
    const bySeqA = new Map(a.map((s) => [s.seq, s]));
    const bySeqB = new Map(b.map((s) => [s.seq, s]));
    const last = Math.max(fork, ...a.map((s) => s.seq), ...b.map((s) => s.seq));
    const table = h("div.compare-rows", { role: "table", "aria-label": "steps after the fork point" });
    let same = 0;
    let differ = 0;
    for (let seq = fork + 1; seq <= last; seq++) {
      const x = bySeqA.get(seq);
      const y = bySeqB.get(seq);
      if (!x && !y) continue;
      const cx = content(x);
      const cy = content(y);
      const fields = new Set();
      if (cx && cy) for (const k of ["head", "input", "output", "status"]) if (cx[k] !== cy[k]) fields.add(k);
      const kind = !x ? "only-right" : !y ? "only-left" : fields.size ? "differs" : "same";
      if (kind === "same") same += 1;
      else differ += 1;
      const marker = { same: "=", differs: "≠", "only-left": "◀", "only-right": "▶" }[kind];
      table.append(h(`div.compare-grid.compare-row.${kind}`, { role: "row", dataset: { seq: String(seq), kind } },
        this.cell(x, y, fields),
        h("div.gutter", { title: kind.replace("-", " "), text: marker }),
        this.cell(y, x, fields)));
    }
    const legend = h("div.compare-legend",
      h("span", { text: `From the fork point on: ${differ} of ${same + differ} steps differ` }),
      h("span.legend-item.differs", { text: "≠ differs" }),
      h("span.legend-item.same", { text: "= same" }),
      h("span.legend-item.only", { text: "◀ ▶ only on one side" }));
    return h("div", legend, same + differ ? table : h("p.compare-note", { text: "Neither branch has steps after the fork point yet." }));
  }

  cell(step, other, fields) {
    if (!step) return h("div.compare-cell.missing", { role: "cell", text: "—" });
    const mark = (k) => (fields.has(k) ? ".field-differs" : "");
    const out = step.output;
    let shown = null;
    if (step.type === "llm_call" && out && typeof out === "object") {
      const calls = (out.tool_calls || []).map((c) => `→ ${c.name} ${oneLine(c.input, 120)}`).join("\n");
      shown = [out.text || "", calls].filter(Boolean).join("\n");
    } else if (step.type === "user_input") shown = null;
    else shown = out;
    // Timing jitters: only a clear difference (1.5× and 100 ms apart) is marked.
    const a = step.durationMs ?? 0;
    const b = other?.durationMs ?? 0;
    const durDiff = other && Math.abs(a - b) >= 100 && Math.max(a, b) >= 1.5 * Math.min(a, b);
    const tokDiff = other && tokensOf(step) !== tokensOf(other);
    return h("div.compare-cell", { role: "cell", dataset: { step: step.id } },
      h(`div.cell-head${mark("head")}`,
        h(`span.badge.type-${step.type}`, { text: TYPE_LABEL[step.type] || step.type }),
        h("span.step-name", { text: displayName(step), title: step.name }),
        h(`span.status-icon.st-${step.status}${mark("status")}`, { title: step.status }),
        h("span.step-id", { text: step.id })),
      step.type === "user_input" || step.type === "tool_call" || step.type === "system_alert"
        ? h(`div.cell-input${mark("input")}`, { text: oneLine(step.input, 300) })
        : null,
      shown !== null && shown !== undefined && shown !== ""
        ? h(`div.cell-output${mark("output")}`, prettyValue(shown))
        : null,
      step.error ? h("div.cell-error", { text: step.error }) : null,
      h("div.cell-figures",
        h(`span${durDiff ? ".num-differs" : ""}`, { text: formatDuration(step.durationMs) }),
        tokensOf(step) ? h(`span${tokDiff ? ".num-differs" : ""}`, { text: `${formatCount(tokensOf(step))} tok` }) : null));
  }
}
