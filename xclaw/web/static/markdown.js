// Answers as Markdown: parsed by marked (GFM: tables, lists, fences), then sanitised by
// DOMPurify before anything reaches the page, because a model's reply is hostile text (HTML
// in it is shown as text, not rendered). Both
// are vendored and pinned (vendor/README.md). No images (a Markdown image is a request to any
// URL the model chose: a way to leak the conversation) and no raw HTML survives the sanitiser;
// links open in a new tab without a referrer. Code blocks get a copy button.

import { Marked } from "./vendor/marked/marked.esm.js";
import DOMPurify from "./vendor/dompurify/purify.es.js";

export const VENDORED = { marked: "18.2.1", dompurify: "3.5.0" };

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escapeHtml = (text) => String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);

// HTML written in the answer is shown as the text it is (never interpreted), like every
// other text from the model; DOMPurify then cleans what Markdown itself produced.
const marked = new Marked({
  gfm: true,
  breaks: true,
  async: false,
  renderer: { html: (token) => escapeHtml(token.text ?? token.raw ?? "") },
});

const PURIFY = {
  USE_PROFILE: { html: true },
  FORBID_TAGS: ["img", "picture", "source", "video", "audio", "iframe", "object", "embed", "form", "input", "button", "style", "svg", "math"],
  FORBID_ATTR: ["style", "srcset", "class", "id"],
  ALLOWED_URI_REGEXP: /^(?:https?|mailto):/i,
  RETURN_DOM_FRAGMENT: true,
};

/** A DocumentFragment with the rendered, sanitised Markdown of `text`. */
export function renderMarkdown(text) {
  const html = marked.parse(String(text ?? ""));
  const fragment = DOMPurify.sanitize(html, PURIFY);
  for (const a of fragment.querySelectorAll("a[href]")) {
    a.target = "_blank";
    a.rel = "noopener noreferrer nofollow";
    a.title = a.getAttribute("href");
  }
  for (const pre of fragment.querySelectorAll("pre")) {
    pre.classList.add("code", "answer-code");
    const box = document.createElement("div");
    box.className = "code-block";
    pre.replaceWith(box);
    const copy = document.createElement("button");
    copy.type = "button";
    copy.className = "copy-code";
    copy.textContent = "Copy";
    copy.setAttribute("aria-label", "Copy the code");
    copy.addEventListener("click", () => copyText(pre.textContent.replace(/\n$/, ""), copy));
    box.append(copy, pre);
  }
  for (const table of fragment.querySelectorAll("table")) {
    const scroll = document.createElement("div");
    scroll.className = "table-scroll";
    table.replaceWith(scroll);
    scroll.append(table);
  }
  return fragment;
}

async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // No clipboard API (an http:// page that is not localhost): select it for Ctrl+C.
    const range = document.createRange();
    range.selectNodeContents(button.nextElementSibling);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    button.textContent = "Selected";
    setTimeout(() => { button.textContent = "Copy"; }, 1500);
    return;
  }
  button.textContent = "Copied";
  setTimeout(() => { button.textContent = "Copy"; }, 1500);
}
