// Time travel from the trace tree: rollback to before a step and fork from a step,
// each asking first and saying exactly what will happen — memory and workspace files.
//
// `app` gives access to the page's state and views (see the `app` object in app.js).

import { ApiError, sessionsApi } from "./api.js";
import { choiceDialog, confirmDialog, promptDialog, toast } from "./dialogs.js";
import { h } from "./dom.js";
import { sessionTitle } from "./sessions.js";
import { displayName } from "./trace.js";

export async function offerSwitch(app, newId, fromStep) {
  const s = app.sidebar.get(newId) || { sessionId: newId };
  const choice = await choiceDialog({
    title: "Fork created",
    body: [
      h("p", h("strong", { text: sessionTitle(s) }), ` branches from ${fromStep || "that step"}. `,
        "It has the history up to and including that step, and the workspace files as they were just after it."),
      h("p.muted", { text: `This session is unchanged. New session id: ${newId}` }),
    ],
    buttons: [
      { label: "Stay here", value: "stay" },
      { label: "Compare", value: "compare" },
      { label: "Switch to the fork", value: "switch", primary: true },
    ],
    dismissValue: "stay",
  });
  if (choice === "switch") app.switchTo(newId);
  if (choice === "compare") app.openCompare(newId);
}


const KIND = { user_input: "user message", llm_call: "LLM call", tool_call: "tool call", system_alert: "alert" };

/** A warning listing the steps among `steps` whose effects reached outside the workspace
 * (an `outside_effects` mark recorded before an MCP or Python tool ran), or null. */
function outsideEffects(steps) {
  const marks = steps.filter((s) => s.type === "system_alert" && s.name === "outside_effects");
  if (!marks.length) return null;
  const n = marks.length;
  return h("div.outside-effects",
    h("p", h("strong", { text: `${n} step${n === 1 ? "" : "s"} had effects outside the workspace; ${n === 1 ? "it is" : "they are"} not undone:` })),
    h("ul", marks.slice(0, 8).map((m) => h("li", h("span.step-id", { text: m.id }), ` ${(m.input && m.input.tool) || "tool"}`))));
}

/** One outside effect of a rollback's preview, in words (as `xclaw chat` and `/rollback` say it). */
function effectLine(e) {
  const head = [h("span.step-id", { text: e.stepId }), ` ${e.tool} `];
  if (e.compensation) {
    const args = Object.entries(e.compensation.args || {}).slice(0, 4)
      .map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ");
    return h("li", head, h("span.undone-by", { text: `undone by ${e.compensation.action}(${args})` }));
  }
  return h("li", head, h("span.not-undone", { text: `not undone: ${e.why || "irreversible"}` }));
}

/** What a rollback does outside the workspace (the gateway's preview), or null when nothing. */
function outsidePreview(preview) {
  const undo = preview.compensable || [], stay = preview.irreversible || [];
  if (!undo.length && !stay.length) return null;
  return h("div.outside-effects",
    undo.length ? [h("p", h("strong", { text: `${undo.length} outside effect${undo.length === 1 ? " is" : "s are"} undone first, in this order:` })),
      h("ul.compensable", undo.map(effectLine))] : null,
    stay.length ? [h("p", h("strong", { text: `${stay.length} outside effect${stay.length === 1 ? "" : "s"} stay${stay.length === 1 ? "s" : ""} done — nothing undoes ${stay.length === 1 ? "it" : "them"}:` })),
      h("ul.irreversible", stay.map(effectLine))] : null);
}

/** A rollback of this session stopped half-way (a compensation failed): retry, go on leaving
 * the rest done, or abandon it. */
async function finishPending(app, step, preview) {
  const choice = await choiceDialog({
    title: "A rollback stopped half-way",
    body: [h("p", { text: `The rollback to before ${preview.pending.stepId} (${preview.pending.planStepId}) stopped: ` +
      "a compensation failed or was cut short. Memory and files are not rewound yet; /steps shows what was undone." })],
    buttons: [
      { label: "Cancel", value: null },
      { label: "Abandon it", value: "abandon" },
      { label: "Roll back leaving the rest done", value: "accept" },
      { label: "Retry", value: "retry", primary: true },
    ],
  });
  if (!choice) return;
  try {
    if (choice === "abandon") {
      await sessionsApi.abandonRollback(app.state.sessionId);
      toast("Rollback abandoned: nothing more is undone, memory and files stay as they are.");
    } else {
      const opts = choice === "retry" ? { retry: true } : { acceptIrreversible: true };
      await rolledBack(app, await sessionsApi.rollback(app.state.sessionId, preview.pending.stepId || step.id, opts));
    }
    await app.reloadTrace();
  } catch (e) {
    app.handleApiError(e);
  }
}

async function rolledBack(app, result) {
  const undone = (result.compensated || []).length, stay = (result.notUndone || []).length;
  toast(`Rolled back to before ${result.stepId}: ${result.deleted} step${result.deleted === 1 ? "" : "s"} deleted` +
    (undone ? `, ${undone} outside effect${undone === 1 ? "" : "s"} undone` : "") +
    (stay ? `, ${stay} left done` : "") + ". Send your new instruction.");
  await app.reloadTrace();
  if (result.session) {
    app.state.status = result.session.status;
    app.state.awaitingInput = Boolean(result.session.awaitingInput);
    app.setStatus(app.state.status);
  }
  app.scheduleSessionsRefresh();
  app.composer.focus();
}

export async function rollbackTo(app, step) {
  const doomed = app.trace.stepsFrom(step);
  const counts = {};
  for (const s of doomed) counts[s.type] = (counts[s.type] || 0) + 1;
  const parts = Object.entries(counts).map(([t, n]) => `${n} ${KIND[t] || t}${n === 1 ? "" : "s"}`);
  const last = doomed[doomed.length - 1];
  let preview = { compensable: [], irreversible: [] };
  try {
    preview = await sessionsApi.rollbackPreview(app.state.sessionId, step.id);
  } catch (e) {
    // Without the preview the marks say which steps reached outside (an older server).
    if (!(e instanceof ApiError)) return app.handleApiError(e);
  }
  if (preview.pending) return finishPending(app, step, preview);
  const outside = preview.compensable ? outsidePreview(preview) : outsideEffects(doomed);
  const stay = (preview.irreversible || []).length;
  const ok = await confirmDialog({
    title: `Rollback to before ${step.id}?`,
    body: [
      h("p", "This deletes ", h("strong", { text: `${doomed.length} step${doomed.length === 1 ? "" : "s"}` }),
        ` (${step.id}${last && last.id !== step.id ? `–${last.id}` : ""}: ${parts.join(", ")}) from this session, `,
        "and puts the ", h("strong", { text: "workspace files" }), ` back as they were before ${step.id}.`),
      h("ul.doomed", doomed.slice(0, 8).map((s) => h("li", h("span.step-id", { text: s.id }), ` ${KIND[s.type] || s.type} · ${displayName(s)}`)),
        doomed.length > 8 ? h("li.muted", { text: `…and ${doomed.length - 8} more` }) : null),
      outside,
      h("p.muted", { text: "It cannot be undone. What the steps did outside the workspace is undone only where the tool " +
        "declares how (its compensation, each recorded as a step); anything else stays done. To keep this path for reference, fork instead." }),
    ],
    confirmLabel: `Delete ${doomed.length} step${doomed.length === 1 ? "" : "s"}`,
    danger: true,
    acknowledge: stay ? `I accept that ${stay === 1 ? "this effect stays" : `these ${stay} effects stay`} done` : null,
  });
  if (!ok) return;
  try {
    const opts = stay ? { acceptIrreversible: true } : {};
    await rolledBack(app, await sessionsApi.rollback(app.state.sessionId, step.id, opts));
  } catch (e) {
    app.handleApiError(e);
    await app.reloadTrace();
  }
}

export async function forkFrom(app, step) {
  const current = app.sidebar.get(app.state.sessionId) || app.state.session || {};
  const title = await promptDialog({
    title: `Fork from ${step.id}`,
    body: [h("p", { text: `A new session gets this session's history up to and including ${step.id}, and the workspace ` +
      `files as they were just after it. This session stays exactly as it is.` }),
      outsideEffects(app.trace.stepsFrom(step).filter((s) => s.seq > step.seq))],
    label: "Title of the new branch",
    value: `${current.title || "Untitled"} · fork at ${step.id}`,
    confirmLabel: "Create fork",
  });
  if (title === null) return;
  try {
    const result = await sessionsApi.fork(app.state.sessionId, step.id, title || undefined);
    await app.refreshSessions();
    await offerSwitch(app, result.session.sessionId, step.id);
  } catch (e) {
    app.handleApiError(e);
  }
}

