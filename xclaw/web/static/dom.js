// Building DOM nodes and formatting values for display. Every piece of text from the server
// goes through textContent (never parsed as HTML), so a tool output cannot inject markup. The
// one exception is an answer's Markdown: parsed by marked and sanitised by DOMPurify into DOM
// nodes (markdown.js), never assigned as an HTML string.
import { renderMarkdown } from "./markdown.js";

/** h("div.card#main", {title: "x", onclick: fn}, child, "text", [more]) */
export function h(spec, attrs, ...children) {
  const [, tag = "div", rest = ""] = /^([a-z0-9-]*)(.*)$/i.exec(spec);
  const el = document.createElement(tag || "div");
  for (const part of rest.match(/[.#][^.#]+/g) || []) {
    if (part[0] === ".") el.classList.add(part.slice(1));
    else el.id = part.slice(1);
  }
  if (attrs && (typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className += (el.className ? " " : "") + value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key === "text") el.textContent = value;
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

/** 850 ms, 4.2 s, 3 min 5 s */
export function formatDuration(ms) {
  if (ms === null || ms === undefined) return "";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  const m = Math.floor(ms / 60_000);
  return `${m} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** 950, 1.2k, 34k */
export function formatCount(n) {
  if (!n) return "0";
  if (n < 1000) return String(n);
  if (n < 10_000) return `${(n / 1000).toFixed(1)}k`;
  return `${Math.round(n / 1000)}k`;
}

/** True when the server reported no token counts: `usage` then holds xclaw's estimate and
 * `tokens` is null (unknown), never a 0 that would read as a fact. */
export function isEstimated(step) {
  return step.usage?.estimated === true;
}

export function tokensOf(step) {
  if (isEstimated(step)) return (step.usage.input || 0) + (step.usage.output || 0);
  const t = step.tokens || {};
  return (t.prompt || 0) + (t.completion || 0);
}

export function formatTokens(step) {
  const t = step.tokens || {};
  const about = isEstimated(step) ? "~" : "";
  const input = about ? step.usage.input : t.prompt;
  const output = about ? step.usage.output : t.completion;
  if (!input && !output) return "";
  const read = step.usage?.cache_read || 0;
  const cached = read ? ` (${formatCount(read)} cached)` : "";
  const cost = typeof step.cost === "number" ? ` · ${about}${formatCost(step.cost)}` : "";
  const note = about ? " (estimated)" : "";
  return `${about}${formatCount(input)}${cached} → ${about}${formatCount(output)} tok${note}${cost}`;
}

/** $0.0042, $1.23 (an estimate from the price table; see docs/llm-providers.md). */
export function formatCost(dollars) {
  return dollars < 1 ? `$${dollars.toFixed(4)}` : `$${dollars.toFixed(2)}`;
}

/** "just now", "5 min ago", "3 h ago", "12 Mar" */
export function timeAgo(ms, now = Date.now()) {
  if (!ms) return "";
  const s = Math.max(0, (now - ms) / 1000);
  if (s < 45) return "just now";
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86_400) return `${Math.round(s / 3600)} h ago`;
  return new Date(ms).toLocaleDateString(undefined, { day: "numeric", month: "short" });
}

export function shortId(id) {
  return id ? String(id).slice(0, 8) : "";
}

/** One line for a tool input: {"command":"ls"} as compact JSON, cut at `max` characters. */
export function oneLine(value, max = 160) {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  const flat = (text ?? "").replace(/\s+/g, " ").trim();
  return flat.length > max ? flat.slice(0, max - 1) + "…" : flat;
}

const FOLD_LINES = 12;
const FOLD_CHARS = 1200;

/** Text in a <pre>; beyond FOLD_LINES lines (or FOLD_CHARS characters) the rest is folded
 * behind a "show all" toggle so one huge tool output does not bury the page. */
export function foldedText(text, cls = "code") {
  text = text ?? "";
  const lines = text.split("\n");
  const long = lines.length > FOLD_LINES || text.length > FOLD_CHARS;
  if (!long) return h(`pre.${cls}`, { text });
  let head = lines.slice(0, FOLD_LINES).join("\n");
  if (head.length > FOLD_CHARS) head = head.slice(0, FOLD_CHARS);
  const pre = h(`pre.${cls}.folded`, { text: head + "\n…" });
  const more = `show all ${lines.length} lines · ${formatCount(text.length)} chars`;
  const button = h("button.linkish.fold-toggle", { type: "button", text: more });
  let open = false;
  button.addEventListener("click", () => {
    open = !open;
    pre.textContent = open ? text : head + "\n…";
    pre.classList.toggle("folded", !open);
    button.textContent = open ? "fold" : more;
  });
  return h("div.fold", pre, button);
}

/** Pretty JSON (strings stay strings, so multi-line tool output reads as text), folded. */
export function prettyValue(value) {
  if (value === null || value === undefined) return h("span.muted", { text: "—" });
  if (typeof value === "string") return foldedText(value);
  return foldedText(JSON.stringify(value, null, 2));
}

/** An answer's text as Markdown, rendered and sanitised (markdown.js). */
export function richText(text) {
  const out = document.createDocumentFragment();
  out.append(h("div.prose.markdown", renderMarkdown(text)));
  return out;
}

export function stableJson(value) {
  if (value === undefined) return "null";
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(stableJson).join(",")}]`;
  return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${stableJson(value[k])}`).join(",")}}`;
}

// Line icons (24×24, stroked; drawn after Lucide's style). Inline SVG: no font or CDN needed.
const ICONS = {
  pencil: ["M12 20h9", "M16.5 3.5a2.12 2.12 0 0 1 3 3L7 19l-4 1 1-4Z"],
  trash: ["M3 6h18", "M8 6V4h8v2", "M19 6l-1 14H6L5 6", "M10 11v6", "M14 11v6"],
  fork: ["circle:6,5,2", "circle:18,5,2", "circle:12,19,2", "M6 7v1a4 4 0 0 0 4 4h4a4 4 0 0 0 4-4V7", "M12 12v5"],
  rollback: ["M3 12a9 9 0 1 0 9-9 9.75 9.75 0 0 0-6.74 2.74L3 8", "M3 3v5h5"],
  plus: ["M12 5v14", "M5 12h14"],
  compare: ["M3 5a2 2 0 0 1 2-2h14a2 2 0 0 1 2 2v14a2 2 0 0 1-2 2H5a2 2 0 0 1-2-2Z", "M12 3v18"],
  stop: ["M7 7h10v10H7Z"],
  send: ["M12 19V5", "M5 12l7-7 7 7"],
  download: ["M12 3v12", "M7 10l5 5 5-5", "M5 21h14"],
  search: ["circle:11,11,7", "M21 21l-4.3-4.3"],
  close: ["M18 6 6 18", "M6 6l12 12"],
  warning: ["M10.3 3.9 1.8 18a2 2 0 0 0 1.7 3h17a2 2 0 0 0 1.7-3L13.7 3.9a2 2 0 0 0-3.4 0Z", "M12 9v4", "M12 17h.01"],
  key: ["circle:7.5,15.5,4.5", "M10.7 12.3 21 2", "M16 7l3 3", "M19 4l2 2"],
  expand: ["M7 15l5 5 5-5", "M7 9l5-5 5 5"],
  collapse: ["M7 20l5-5 5 5", "M7 4l5 5 5-5"],
  back: ["M19 12H5", "M12 19l-7-7 7-7"],
  refresh: ["M21 12a9 9 0 1 1-3-6.7L21 8", "M21 3v5h-5"],
};

export function icon(name, { size = 16, cls = "" } = {}) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("width", size);
  svg.setAttribute("height", size);
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("class", `ico ico-${name} ${cls}`.trim());
  for (const d of ICONS[name] || []) {
    let el;
    if (d.startsWith("circle:")) {
      const [cx, cy, r] = d.slice(7).split(",");
      el = document.createElementNS(ns, "circle");
      el.setAttribute("cx", cx);
      el.setAttribute("cy", cy);
      el.setAttribute("r", r);
    } else {
      el = document.createElementNS(ns, "path");
      el.setAttribute("d", d);
    }
    svg.append(el);
  }
  return svg;
}
