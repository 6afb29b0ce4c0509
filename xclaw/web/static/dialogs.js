// Modal dialogs (native <dialog>: focus trapping and Escape come from the browser) and toasts.

import { h, oneLine, prettyValue } from "./dom.js";

/** Open a modal; `build(close)` returns its content. Resolves with what close() is given;
 * Escape or a click on the backdrop resolves with `dismissValue`. */
function modal(build, { cls = "", dismissValue = null, label = "dialog" } = {}) {
  return new Promise((resolve) => {
    const dialog = h(`dialog.modal${cls ? "." + cls : ""}`, { "aria-label": label });
    let done = false;
    const close = (value) => {
      if (done) return;
      done = true;
      dialog.close();
      dialog.remove();
      resolve(value);
    };
    dialog.append(build(close));
    dialog.addEventListener("cancel", (e) => {
      e.preventDefault();
      close(dismissValue);
    });
    dialog.addEventListener("click", (e) => {
      if (e.target === dialog) close(dismissValue);
    });
    dialog.closeWith = close;
    document.body.append(dialog);
    dialog.showModal();
    const focus = dialog.querySelector("[autofocus]") || dialog.querySelector("button.primary");
    focus?.focus();
  });
}

/** Yes/no question. Resolves true when confirmed. With `acknowledge` (a sentence), a checkbox
 * saying it must be ticked before the confirm button works: an explicit word, not a click. */
export function confirmDialog({ title, body, confirmLabel = "OK", danger = false, cancelLabel = "Cancel", acknowledge = null }) {
  return modal(
    (close) => {
      const confirm = h(`button.primary${danger ? ".danger" : ""}`, { type: "submit", autofocus: true, text: confirmLabel });
      let tick = null;
      if (acknowledge) {
        confirm.disabled = true;
        tick = h("input", { type: "checkbox", name: "acknowledge", onchange: () => { confirm.disabled = !tick.checked; } });
      }
      return h("form.dialog-body", { method: "dialog", onsubmit: (e) => { e.preventDefault(); if (!confirm.disabled) close(true); } },
        h("h2", { text: title }),
        h("div.dialog-text", body),
        tick ? h("label.acknowledge", tick, " ", h("span", { text: acknowledge })) : null,
        h("div.dialog-actions",
          h("button.ghost", { type: "button", onclick: () => close(false), text: cancelLabel }),
          confirm));
    },
    { dismissValue: false, label: title },
  );
}

/** Ask for one line of text. Resolves with the text, or null when cancelled. */
export function promptDialog({ title, body, label, value = "", confirmLabel = "OK", placeholder = "" }) {
  return modal((close) => {
    const input = h("input.text-input", { type: "text", value, placeholder, autofocus: true, "aria-label": label, name: "value" });
    setTimeout(() => input.select(), 0);
    return h("form.dialog-body", { onsubmit: (e) => { e.preventDefault(); close(input.value.trim()); } },
      h("h2", { text: title }),
      body ? h("div.dialog-text", body) : null,
      h("label.field", h("span.field-label", { text: label }), input),
      h("div.dialog-actions",
        h("button.ghost", { type: "button", onclick: () => close(null), text: "Cancel" }),
        h("button.primary", { type: "submit", text: confirmLabel })));
  }, { label: title });
}

/** Several buttons; resolves with the value of the one pressed (or `dismissValue`). */
export function choiceDialog({ title, body, buttons, dismissValue = null }) {
  return modal(
    (close) =>
      h("div.dialog-body",
        h("h2", { text: title }),
        h("div.dialog-text", body),
        h("div.dialog-actions",
          buttons.map((b) => h(`button.${b.primary ? "primary" : "ghost"}`, {
            type: "button", autofocus: b.primary || undefined, onclick: () => close(b.value), text: b.label,
          })))),
    { dismissValue, label: title },
  );
}

/** The human-in-the-loop question. Returns {promise, close}: the promise resolves with
 * true/false (approve/deny); close() takes the dialog away when another client answered. */
export function approvalDialog(frame) {
  let dialogClose = null;
  // What the person adds to the answer (docs/approval.md): a reason the model reads, and an
  // input the call runs with instead of the model's (when approving).
  const said = h("input.text-input.approval-message", {
    type: "text", placeholder: "a reason the model reads (optional)", "aria-label": "Reason told to the model",
  });
  const original = JSON.stringify(frame.input ?? {}, null, 2);
  const edit = h("textarea.text-input.approval-edit", { rows: 6, spellcheck: "false", "aria-label": "Edited input" });
  edit.value = original;
  const problem = h("p.approval-problem", { role: "alert", hidden: true });
  const extras = { message: null, input: null };
  const answer = (close, yes) => {
    extras.message = said.value.trim() || null;
    extras.input = null;
    if (yes && edit.value.trim() !== original.trim()) {
      try {
        const parsed = JSON.parse(edit.value);
        if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("not an object");
        extras.input = parsed;
      } catch (e) {
        problem.textContent = `The edited input is not a JSON object: ${e.message}`;
        problem.hidden = false;
        return;
      }
    }
    close(yes);
  };
  const promise = modal((close) => {
    dialogClose = close;
    const keys = (e) => {
      if (e.target instanceof HTMLInputElement || e.target instanceof HTMLTextAreaElement) return;
      if (e.key !== "y" && e.key !== "n") return;
      e.preventDefault(); // the key must not land in the message box once the dialog is gone
      answer(close, e.key === "y");
    };
    const body = h("div.dialog-body.approval", { onkeydown: keys },
      h("div.approval-head",
        h("span.approval-icon", { "aria-hidden": "true", text: "?" }),
        h("div",
          h("h2", { text: "Approve this tool call?" }),
          h("p.muted", { text: `Step ${frame.stepId || "?"}${frame.agent ? ` · sub-agent ${frame.agent}` : ""}` }))),
      h("div.approval-call",
        h("span.tool-name", { text: frame.name }),
        h("code.tool-input", { text: oneLine(frame.input, 400) })),
      frame.reason ? h("p.approval-reason", h("strong", { text: "Why it asks: " }), frame.reason) : null,
      frame.maybeRepeated
        ? h("div.warning", { role: "alert" },
            h("strong", { text: "This call may already have run. " }),
            "It was interrupted when the server stopped, so it may have taken effect (fully or partly). " +
            "Approving runs it again.")
        : null,
      h("details.approval-json", h("summary", { text: "full input" }), prettyValue(frame.input)),
      said,
      h("details.approval-edit-box", h("summary", { text: "edit the input before approving" }), edit),
      problem,
      h("div.dialog-actions",
        h("span.hint", { text: "y / n" }),
        // Focus starts on Deny: a stray Enter must not run a command nobody read.
        h("button.ghost.deny", { type: "button", autofocus: true, onclick: () => answer(close, false), text: "Deny" }),
        h("button.primary.approve", { type: "button", onclick: () => answer(close, true), text: "Approve" })));
    return body;
  }, { cls: "approval-dialog", dismissValue: undefined, label: "Approve this tool call?" });
  return { promise, close: () => dialogClose?.(undefined), extras };
}

let toastHost = null;

/** A short message at the bottom right; optional action button. */
export function toast(message, { kind = "info", action = null, timeout = 6000 } = {}) {
  if (!toastHost) {
    toastHost = h("div.toasts", { role: "status", "aria-live": "polite" });
    document.body.append(toastHost);
  }
  const item = h(`div.toast.${kind}`, h("span", { text: message }));
  const dismiss = () => item.remove();
  if (action) {
    item.append(h("button.linkish", { type: "button", text: action.label, onclick: () => { dismiss(); action.run(); } }));
  }
  item.append(h("button.toast-close", { type: "button", "aria-label": "dismiss", text: "×", onclick: dismiss }));
  toastHost.append(item);
  if (timeout) setTimeout(dismiss, timeout);
  return dismiss;
}
