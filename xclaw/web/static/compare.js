// Branch comparison (fork: "the two paths can be compared side by side"): two sessions of one
// fork family, from the point where they part: steps, answers, tool outputs, duration and
// tokens, with the differences marked.
//
// After the fork point the two branches are aligned by content, not by step number: a diff
// (longest common subsequence) over step signatures — type, name, input — so a step both
// branches took lines up even when one branch did more before it. Rows are `same` (signature
// and result equal), `changed` (same kind of step at the same place, different input or
// result), `only-left` or `only-right`.

import { sessionsApi } from "./api.js";
import { clear, formatCount, formatDuration, h, icon, oneLine, prettyValue, stableJson, tokensOf } from "./dom.js";
import { familyOf, forest, sessionState, sessionTitle } from "./sessions.js";
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

/** What makes two steps "the same step": its kind, its name and its input. */
export function signature(step) {
  const input = step.type === "llm_call" ? null : step.input;
  return stableJson([step.type, step.name, input]);
}

/** Longest common subsequence of two lists of keys: pairs of matched indexes, in order. */
function lcs(xs, ys) {
  const n = xs.length;
  const m = ys.length;
  const len = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      len[i][j] = xs[i] === ys[j] ? len[i + 1][j + 1] + 1 : Math.max(len[i + 1][j], len[i][j + 1]);
    }
  }
  const pairs = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (xs[i] === ys[j]) { pairs.push([i, j]); i++; j++; }
    else if (len[i + 1][j] >= len[i][j + 1]) i++;
    else j++;
  }
  return pairs;
}

/** Rows [left step|null, right step|null] aligned by content. Between two matched steps,
 * unmatched steps of the same type and name pair up (a different instruction at the same place is one
 * `changed` row, not two one-sided ones). */
export function align(a, b) {
  const pairs = lcs(a.map(signature), b.map(signature));
  const rows = [];
  const gap = (xs, ys) => {
    let i = 0;
    let j = 0;
    while (i < xs.length || j < ys.length) {
      const x = xs[i];
      const y = ys[j];
      const kin = (p, q) => p.type === q.type && p.name === q.name; // same tool, same model
      if (x && y && kin(x, y)) { rows.push([x, y]); i++; j++; }
      else if (x && (!y || ys.slice(j).every((t) => !kin(x, t)))) { rows.push([x, null]); i++; }
      else { rows.push([null, y]); j++; }
    }
  };
  let pi = 0;
  let pj = 0;
  for (const [i, j] of pairs) {
    gap(a.slice(pi, i), b.slice(pj, j));
    rows.push([a[i], b[j]]);
    pi = i + 1;
    pj = j + 1;
  }
  gap(a.slice(pi), b.slice(pj));
  return rows;
}

/** A line diff of two texts: [{op: " "|"-"|"+", line}]. */
export function lineDiff(left, right) {
  const xs = (left || "").split("\n");
  const ys = (right || "").split("\n");
  const out = [];
  let i = 0;
  let j = 0;
  for (const [pi, pj] of lcs(xs, ys)) {
    while (i < pi) out.push({ op: "-", line: xs[i++] });
    while (j < pj) out.push({ op: "+", line: ys[j++] });
    out.push({ op: " ", line: xs[i] });
    i++;
    j++;
  }
  while (i < xs.length) out.push({ op: "-", line: xs[i++] });
  while (j < ys.length) out.push({ op: "+", line: ys[j++] });
  return out;
}

/** An approval step in words: what was asked and what the answer was. */
function approvalWords(step) {
  const input = step.input || {};
  const args = input.args && typeof input.args === "object"
    ? input.args.command ?? input.args.path ?? oneLine(input.args, 200)
    : "";
  const out = step.output && typeof step.output === "object" ? step.output : null;
  const verdict = step.status === "running" ? "waiting for an answer"
    : out ? (out.why || (out.approved ? "approved" : "denied")) : step.error || "not answered";
  return `asked to run ${input.tool || "a tool"}${args ? `: ${args}` : ""} — ${verdict}`;
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
      const opt = h("option", { value: s.sessionId, text: `${"  ".repeat(depth)}${depth ? "⤷ " : ""}${sessionTitle(s)} — ${sessionState(s).text}` });
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
          h(`span.status-dot.st-${sessionState(s).key}`, { "aria-hidden": "true", title: sessionState(s).text }),
          h("strong", { text: sessionTitle(s) }),
          h("span.muted.mono", { text: id.slice(0, 10) }),
          h("button.linkish.small", { type: "button", text: "open", onclick: () => this.onSwitch(id) })),
        h("div.compare-figures",
          h(`span${diff(t.steps, o.steps)}`, { text: `${t.steps} step${t.steps === 1 ? "" : "s"} after the fork` }),
          h(`span${diff(t.tools, o.tools)}`, { text: `${t.tools} tool call${t.tools === 1 ? "" : "s"}` }),
          h("span", { text: formatDuration(t.duration) || "0 ms" }),
          h(`span${diff(t.tokens, o.tokens)}`, { text: `${formatCount(t.tokens)} tokens` })),
        h(`div.compare-answer${answer !== otherAnswer ? ".differs" : ""}`,
          h("div.io-label", { text: answer === null ? "no final answer after the fork" : "final answer" }),
          answer === null ? null : h("div.answer-text", { text: answer })));
    };
    const grid = h("div.compare-grid.compare-summary",
      card(this.left, a, b),
      h("div.gutter"),
      card(this.right, b, a));
    const x = finalAnswer(a);
    const y = finalAnswer(b);
    if (x === null || y === null || x === y) return grid;
    const diff = h("details.compare-answer-diff", { open: true },
      h("summary", { text: "The final answers, line by line (− left, + right)" }),
      h("pre.text-diff", lineDiff(x, y).map((d) =>
        h(`span.diff-line${d.op === "-" ? ".del" : d.op === "+" ? ".add" : ""}`, { text: `${d.op} ${d.line}\n` }))));
    return h("div", grid, diff);
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
    // Sub-agents' steps are compared inside their spawning call's result, not row by row.
    const main = (xs) => xs.filter((s) => s.agent === "main" || !s.agent);
    const table = h("div.compare-rows", { role: "table", "aria-label": "steps after the fork point" });
    const count = { same: 0, changed: 0, "only-left": 0, "only-right": 0 };
    for (const [x, y] of align(main(a), main(b))) {
      const cx = content(x);
      const cy = content(y);
      const fields = new Set();
      if (cx && cy) for (const k of ["head", "input", "output", "status"]) if (cx[k] !== cy[k]) fields.add(k);
      const kind = !x ? "only-right" : !y ? "only-left" : fields.size ? "changed" : "same";
      count[kind] += 1;
      const marker = { same: "=", changed: "≠", "only-left": "◀", "only-right": "▶" }[kind];
      const seq = String((x || y).seq);
      table.append(h(`div.compare-grid.compare-row.${kind}`, { role: "row", dataset: { seq, kind } },
        this.cell(x, y, fields),
        h("div.gutter", { title: kind.replace("-", " "), text: marker }),
        this.cell(y, x, fields)));
    }
    const total = count.same + count.changed + count["only-left"] + count["only-right"];
    const legend = h("div.compare-legend",
      h("span", { text: `From the fork point on: ${count.same} same, ${count.changed} changed, ` +
        `${count["only-left"]} only left, ${count["only-right"]} only right` }),
      h("span.legend-item.changed", { text: "≠ changed" }),
      h("span.legend-item.same", { text: "= same" }),
      h("span.legend-item.only", { text: "◀ ▶ only on one side" }));
    return h("div", legend, total ? table : h("p.compare-note", { text: "Neither branch has steps after the fork point yet." }));
  }

  cell(step, other, fields) {
    if (!step) return h("div.compare-cell.missing", { role: "cell", text: "—" });
    const mark = (k) => (fields.has(k) ? ".field-differs" : "");
    const out = step.output;
    let shown = null;
    if (step.type === "llm_call" && out && typeof out === "object") {
      const calls = (out.tool_calls || []).map((c) => `→ ${c.name} ${oneLine(c.input, 120)}`).join("\n");
      shown = [out.text || "", calls].filter(Boolean).join("\n");
    } else if (step.type === "user_input" || (step.type === "system_alert" && step.name === "approval")) shown = null;
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
      step.type === "system_alert" && step.name === "approval"
        ? h(`div.cell-input${mark("input")}${mark("output")}`, { text: approvalWords(step) })
        : step.type === "system_alert"
          ? h(`div.cell-input${mark("input")}`, { text: summary(step) })  // in words, as the trace says it
          : step.type === "user_input" || step.type === "tool_call"
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
