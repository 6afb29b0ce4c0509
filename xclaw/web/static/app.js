// The xclaw web client: wires the socket, the HTTP API and the views together.
//
// State lives on the server. This page only remembers two things, in localStorage: the access
// token (`xclaw_token`) and the session it shows (`xclaw_session_id`, the original tutorial's
// key: change it and reload to switch branches). Everything on screen is rebuilt from the frames of
// docs/protocol.md — `history` on every (re)connect — so a refresh or a server restart loses nothing.

import {
  ApiError, Unauthorized, adoptUrlParams, api, getToken, newSessionId, sessionsApi, setToken, storeSessionId,
  storedSessionId, wsUrl,
} from "./api.js";
import { Composer, QueueList, Transcript } from "./chat.js";
import { CompareView } from "./compare.js";
import { approvalDialog, confirmDialog, promptDialog, toast } from "./dialogs.js";
import { h, icon, shortId } from "./dom.js";
import { Sidebar, familyOf, sessionState, sessionTitle } from "./sessions.js";
import { ProcessList } from "./processes.js";
import { ScheduleList } from "./schedules.js";
import { Socket } from "./socket.js";
import { forkFrom, offerSwitch, rollbackTo } from "./timetravel.js";
import { TraceTree } from "./trace.js";

const $ = (id) => document.getElementById(id);

const state = {
  sessionId: null,
  session: null, // the last `session` frame / API object for the current session
  status: "Init",
  busy: false,
  busyEpoch: 0, // bumped by every setBusy: tells a stale refreshBusy answer from a fresh one
  awaitingInput: false,
  unsaved: false, // attached to a session that is written at its first message
  approval: null, // {stepId, frame, handle}
  historyReason: "restored",
  rollbackNotice: null,
  sessions: [],
  me: null, // the user this page is signed in as (null: the server's own token)
  // The attach this page asked for that the gateway has not finished: {id, from, fresh,
  // answered, error}; id null for a typed /switch or /new TITLE, whose session only the
  // gateway's answer names. See "which session" below.
  attaching: null,
  outbox: [], // [{text, el}]: typed while attaching; sent once attached, to that session
  // setBusy's epoch right after a held message locked the composer: busy at that epoch is
  // the page's own doing (the message waiting), not a run the gateway reported.
  heldBusyEpoch: null,
  agents: [], // the agents a session may run here (GET /api/agents; docs/agents.md)
  newAgent: null, // the declared agent the current new session runs (its first message says it)
};

let socket;
let transcript;
let composer;
let queueList;
let trace;
let sidebar;
let compare;
let processes;
let schedules;

// What the time-travel actions (timetravel.js) may use of this page.
const app = {
  state,
  get sidebar() { return sidebar; },
  get trace() { return trace; },
  get composer() { return composer; },
  setStatus, reloadTrace, scheduleSessionsRefresh, refreshSessions, handleApiError, switchTo, openCompare,
};

// --- access -----------------------------------------------------------------------------------

function showAccess(reason) {
  socket?.stop();
  $("app").hidden = true;
  $("access").hidden = false;
  $("access-reason").textContent =
    reason === "wrong"
      ? "The access token this browser has is missing or wrong (the server may have a new one)."
      : "This page needs the access token of the xclaw server.";
  $("access").dataset.reason = reason;
  $("token-input").focus();
}

function setupAccessForm() {
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const token = $("token-input").value.trim();
    if (!token) return;
    setToken(token);
    window.location.reload();
  });
}

// --- status, busy, connection -------------------------------------------------------------------

/** The words of a session that waits for a budget (state `budget`: which cap, spent, left). */
function budgetText(s) {
  return s && s.state === "budget" ? s.stateText : null;
}

function setStatus(status) {
  if (!status) return;
  state.status = status;
  const pill = $("status-pill");
  // One rule with the server (sessionState): Running only while a run is in flight.
  const st = sessionState({
    ...(state.session || {}), status, busy: state.busy, awaitingInput: state.awaitingInput, budgetText: state.budgetText,
  });
  pill.className = `status-pill st-${st.key}`;
  pill.dataset.state = st.key;
  pill.textContent = st.text;
  pill.title = st.text; // the whole of it where the bar cuts it short (a budget's words)
  if (state.sessionId) {
    sidebar.patch(state.sessionId, { status, busy: state.busy, awaitingInput: state.awaitingInput, budgetText: state.budgetText });
  }
}

function setBusy(busy) {
  state.busyEpoch += 1;
  state.busy = busy;
  if (busy) state.awaitingInput = false;
  const paused = state.status === "Paused";
  composer.setLocked(busy, paused ? "Waiting for your approval — input is locked until the run finishes" : "", !paused);
  trace.setBusy(busy);
  transcript.setWorking(busy && !state.approval);
  setStatus(state.status);
}

/** Ask the server whether a run is in flight (after an error or the end of a run). A live
 * frame that arrives while the request is out (the run's `reply`, say) is newer than the
 * answer: the answer is then dropped, so a stale "busy" cannot lock the input again. */
async function refreshBusy() {
  if (!state.sessionId) return;
  if (state.unsaved) return setBusy(false); // nothing written, nothing running
  const epoch = state.busyEpoch;
  try {
    const s = await sessionsApi.get(state.sessionId);
    if (s.sessionId !== state.sessionId || state.busyEpoch !== epoch) return;
    state.status = s.status;
    state.awaitingInput = Boolean(s.awaitingInput);
    state.budgetText = budgetText(s);
    setBusy(Boolean(s.busy));
  } catch (e) {
    handleApiError(e, { quiet: true });
  }
}

function setConnection(kind, attempt, delay) {
  const conn = $("conn");
  conn.dataset.state = kind;
  const text = conn.querySelector(".conn-text");
  const banner = $("banner");
  if (kind === "open") {
    text.textContent = "connected";
    banner.hidden = true;
    composer.setOffline(false);
    return;
  }
  composer.setOffline(true);
  if (kind === "connecting") {
    text.textContent = attempt ? "reconnecting…" : "connecting…";
    return;
  }
  if (kind === "waiting") {
    const secs = Math.max(1, Math.round(delay / 1000));
    text.textContent = `offline · retry in ${secs} s`;
    banner.hidden = false;
    banner.replaceChildren(
      h("span.banner-dot"),
      h("span.banner-text", { text: `Connection to the xclaw server lost — reconnecting (attempt ${attempt})… ` +
        "Nothing is lost: the session continues from its record." }),
      h("button.linkish", { type: "button", text: "Retry now", onclick: () => socket.retryNow() }));
  }
}

// --- frames ------------------------------------------------------------------------------------

function onFrame(frame) {
  const sid = frame.sessionId;
  // Frames of a session this page left a moment ago (the switch is in flight) are stale.
  const foreign = sid && state.sessionId && sid !== state.sessionId;
  // The first message wrote the session: from its first step on, it has a record to fetch.
  if (!foreign && state.unsaved && (frame.type === "step" || frame.type === "renamed")) state.unsaved = false;
  switch (frame.type) {
    case "session":
      return onSession(frame);
    case "history":
      if (foreign) return;
      transcript.renderHistory(frame.messages || [], { sessionTitle: state.session?.title, reason: state.historyReason });
      for (const m of state.outbox) transcript.again(m.el); // typed before the history came
      // The rollback notice came just before the new history: keep it visible below it.
      if (state.historyReason === "rollback" && state.rollbackNotice) transcript.notice(state.rollbackNotice);
      state.historyReason = "restored";
      state.rollbackNotice = null;
      transcript.setWorking(state.busy && !state.approval);
      return;
    case "status":
      if (foreign) return;
      state.status = frame.status;
      if ("awaitingInput" in frame) state.awaitingInput = Boolean(frame.awaitingInput);
      if ("state" in frame) state.budgetText = budgetText(frame);
      if ("busy" in frame) setBusy(Boolean(frame.busy));
      else if (frame.status === "Success" || frame.status === "Failed") refreshBusy();
      else setStatus(frame.status);
      scheduleSessionsRefresh();
      return;
    case "delta":
      if (foreign) return;
      if (!state.busy) setBusy(true);
      transcript.delta(frame.content || "");
      return;
    case "thinking":
      if (foreign) return;
      transcript.thinking(frame);
      return;
    case "thinking_discarded":
      if (foreign) return;
      transcript.discardThinking();
      return;
    case "reply":
      if (foreign) return;
      transcript.reply(frame.content || "");
      setBusy(false);
      scheduleSessionsRefresh();
      reloadTrace(); // the end of a run: make the tree exactly what the record says
      return;
    case "tool":
      if (foreign) return;
      if (frame.state === "running" && !state.busy) setBusy(true);
      transcript.tool(frame);
      return;
    case "approval_request":
      if (foreign) return;
      return showApproval(frame);
    case "step":
      if (foreign) return;
      trace.upsert(frame.step);
      if (frame.step.type === "user_input" && frame.step.agent === "main") {
        const out = frame.step.output || {};
        // A schedule's or a webhook's fire (docs/schedules.md): its id is the message's.
        const fired = /^(schedule|hook)\./.exec(String(out.messageId || ""));
        // Another person's message in a shared session (docs/teams.md): shown as theirs.
        const sender = out.by?.user;
        const mid = out.messageId;
        const text = String(frame.step.input ?? "");
        // A message that waited in the queue runs (or steers the run) now: shown as said.
        const waited = mid && queueList.waited(mid) !== null;
        if (waited) queueList.seen.delete(mid);
        if (fired) transcript.user(text, fired[1] === "hook" ? "webhook" : "schedule");
        else if (sender && sender !== state.me) transcript.user(text, sender);
        else if (waited) transcript.user(text);
      }
      if (state.approval && frame.step.id === state.approval.stepId && frame.step.status !== "running") {
        state.approval.handle.close(); // answered here or by another client
        state.approval = null;
        clearApprovalReminder();
      }
      return;
    case "notice":
      if (foreign) return;
      transcript.notice(frame.content || "");
      if ((frame.content || "").startsWith("[rollback]")) state.rollbackNotice = frame.content;
      // Resume marked interrupted steps without a `step` frame each: fetch the tree again.
      if ((frame.content || "").startsWith("[resume]")) reloadTrace();
      return;
    case "rolledback":
      if (foreign) return;
      state.historyReason = "rollback";
      reloadTrace();
      scheduleSessionsRefresh();
      return;
    case "renamed":
      if (foreign) return;
      state.session = { ...(state.session || {}), title: frame.title };
      sidebar.patch(sid, { title: frame.title });
      renderHeader();
      // The first message just wrote the session: list it now, not after the run.
      if (!sidebar.get(sid)) refreshSessions();
      else scheduleSessionsRefresh();
      return;
    case "queue":
      // The session's waiting messages (docs/protocol.md, "Input while a run is busy").
      if (foreign) return;
      queueList.show(frame.queued || []);
      return;
    case "forked":
      refreshSessions().then(() => offerSwitch(app, frame.sessionId, frame.fromStepId));
      return;
    case "error":
      if (frame.code === "unauthorized") return showAccess("wrong");
      // Why the gateway refused the session asked for (it names the one left, if any).
      if (state.attaching && !state.attaching.error && ATTACH_REFUSALS.has(frame.code)) state.attaching.error = frame;
      if (foreign) return;
      transcript.error(frame.content || "error", frame.code);
      if (frame.code === "busy") setBusy(true);
      else refreshBusy();
      return;
    default:
      return; // pong, steps (the notice beside it shows them), future frame types
  }
}

function onSession(frame) {
  const asked = state.attaching;
  if (asked) {
    if (asked.id !== null && frame.sessionId !== asked.id) return; // an earlier switch's answer
    asked.answered = true;
  }
  const changed = frame.sessionId !== state.sessionId;
  state.sessionId = frame.sessionId;
  state.session = frame;
  state.status = frame.status;
  state.awaitingInput = Boolean(frame.awaitingInput);
  state.budgetText = budgetText(frame);
  // `created`: attached to a session that is written with its first message (docs/protocol.md).
  state.unsaved = Boolean(frame.created);
  storeSessionId(frame.sessionId);
  if (changed) leaveSession();
  renderHeader();
  setStatus(frame.status);
  sidebar.setCurrent(frame.sessionId);
  reloadTrace();
  if (frame.created || !sidebar.get(frame.sessionId)) refreshSessions();
}

function renderHeader() {
  const s = { ...(sidebar.get(state.sessionId) || {}), ...(state.session || {}) };
  const listed = sidebar.get(state.sessionId);
  if (listed && listed.title !== undefined) s.title = listed.title;
  // A session not written yet (no message) has no title until its first message.
  $("session-title").textContent = s.sessionId && (s.title || !state.session?.created) ? sessionTitle(s) : "New session";
  $("session-id").textContent = s.sessionId || "";
  const agent = s.agent || s.metadata?.agent?.name || state.newAgent;
  const agentEl = $("session-agent");
  agentEl.hidden = !agent || agent === "default";
  agentEl.textContent = agentEl.hidden ? "" : `agent · ${agent}`;
  agentEl.title = agentEl.hidden ? "" : "the declared agent this session runs (xclaw.yaml agents:)";
  const forkInfo = $("fork-info");
  forkInfo.replaceChildren();
  if (s.isForked && s.parentSessionId) {
    const parent = sidebar.get(s.parentSessionId);
    const from = listed?.forkedFromSeq ? ` at s${String(listed.forkedFromSeq).padStart(4, "0")}` : "";
    forkInfo.append(icon("fork", { size: 12 }), " fork of ",
      h("button.linkish", { type: "button", text: parent ? sessionTitle(parent) : shortId(s.parentSessionId),
        onclick: () => switchTo(s.parentSessionId) }), from);
  }
  const family = familyOf(state.sessions, state.sessionId);
  const compareBtn = $("compare-btn");
  compareBtn.disabled = family.length < 2;
  compareBtn.title = family.length < 2
    ? "Fork this session from a step in the trace to compare the branches"
    : "Compare this session with a fork, side by side";
  document.title = s.sessionId ? `${sessionTitle(s)} · xclaw` : "xclaw";
}

// --- approvals --------------------------------------------------------------------------------

async function showApproval(frame) {
  if (state.approval && state.approval.stepId === frame.stepId) return; // asked again on reconnect
  state.approval?.handle.close();
  clearApprovalReminder();
  transcript.endLive();
  const handle = approvalDialog(frame);
  const mine = { stepId: frame.stepId, frame, handle };
  state.approval = mine;
  transcript.setWorking(false);
  setBusy(true);
  const answer = await handle.promise;
  if (state.approval !== mine) return; // closed because someone answered or the session changed
  if (answer === true || answer === false) {
    state.approval = null;
    // client: the record says a person answered on the web page (docs/approval.md).
    const reply = { type: "approval", sessionId: state.sessionId, stepId: frame.stepId, approve: answer, client: "web" };
    if (handle.extras.message) reply.message = handle.extras.message; // the model reads it
    if (answer && handle.extras.input) reply.input = handle.extras.input; // runs instead
    socket.send(reply);
    const how = answer ? (reply.input ? "approved as edited" : "approved") : "denied";
    transcript.notice(`[approval] ${how}: ${frame.name} (${frame.stepId})${reply.message ? ` — ${reply.message}` : ""}`);
    transcript.setWorking(true);
  } else {
    // Dismissed without an answer: the run stays Paused; keep a way back to the question.
    state.approval = null;
    const reminder = h("div.approval-reminder", { role: "alert" },
      icon("warning", { size: 16 }),
      h("span", { text: `xclaw is waiting for your approval of ${frame.name} (${frame.stepId}).` }),
      h("button.primary.small", { type: "button", text: "Review", onclick: () => { reminder.remove(); showApproval(frame); } }));
    transcript.add(reminder, { force: true });
  }
}

function clearApprovalReminder() {
  document.querySelectorAll(".approval-reminder").forEach((el) => el.remove());
}

// --- sessions -----------------------------------------------------------------------------------

let refreshTimer = null;

function scheduleSessionsRefresh() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(refreshSessions, 400);
}

async function refreshSessions() {
  try {
    state.sessions = await sessionsApi.list();
    sidebar.setSessions(state.sessions);
    renderHeader();
  } catch (e) {
    handleApiError(e, { quiet: true });
  }
}

// --- which session: the one the person chose, at once -------------------------------------------
// New session, a click in the list, a fork's "switch": the page is on the chosen session the
// moment it is chosen (a new one gets its id here) and tells the gateway with `reconnect`.
// Whatever is typed before the gateway has finished that attach (socket.settled()) waits in
// state.outbox and goes once it has, naming the session it opened — never to the session left
// behind, however slow the answer. A /switch or /new TITLE typed in the composer is the
// gateway's to resolve: what is typed after it waits the same way. If the gateway refuses,
// nothing waiting is sent: it goes back into the composer.

// The codes with which the gateway refuses an attach (docs/protocol.md, Errors).
const ATTACH_REFUSALS = new Set(["unknown_session", "ambiguous_session", "bad_command", "bad_frame", "forbidden"]);

function leaveSession() {
  queueList.clear(); // the next session's attach sends its own
  if (state.approval) state.approval.handle.close();
  state.approval = null;
  clearApprovalReminder();
  trace.clearAll();
  processes.clearAll();
  schedules.clearAll();
  compare.close();
  showWorkspace();
}

/** Send `frame` (a reconnect, or a command that re-attaches) and hold what is typed until the
 * gateway has answered it. False when offline: the socket's onOpen attaches again. */
function attach(target, frame) {
  state.attaching = target;
  if (!socket.send(frame)) return false;
  socket.settled().then((done) => {
    if (done) attachSettled(target);
  });
  return true;
}

function attachSettled(target) {
  if (state.attaching !== target) return; // a later switch took over
  state.attaching = null;
  if (target.answered) return sendOutbox();
  withdrawOutbox();
  if (target.id === null) return refreshBusy(); // a typed /switch: the page never left; the error is shown
  const why = target.error?.content || "the server did not open it";
  toast(`Could not open session ${shortId(target.id)}: ${why}`, { kind: "error", timeout: 9000 });
  if (target.from) openSession(target.from, { from: null });
  else if (!target.fresh) newSession();
}

/** Show session `id` now (`fresh`: a new one, made here) and attach this socket to it. */
function openSession(id, { fresh = false, from = state.sessionId, keepOutbox = false } = {}) {
  if (!keepOutbox) withdrawOutbox(); // typed for the session being left: not sent after all
  storeSessionId(id);
  leaveSession();
  state.sessionId = id;
  state.newAgent = null;
  state.session = fresh ? { sessionId: id, status: "Init", title: "", created: true } : { ...(sidebar.get(id) || {}), sessionId: id };
  state.status = state.session.status || "Init";
  state.awaitingInput = Boolean(state.session.awaitingInput);
  state.unsaved = fresh;
  state.historyReason = "restored";
  if (fresh) transcript.renderHistory([]);
  else transcript.reset(); // its history follows
  for (const m of state.outbox) transcript.again(m.el); // kept: typed after a /new
  setBusy(false);
  renderHeader();
  sidebar.setCurrent(id);
  const target = { id, from: from === id ? null : from, fresh, answered: false, error: null };
  return attach(target, { type: "reconnect", sessionId: id });
}

function onSocketOpen() {
  const asked = state.attaching;
  if (asked && asked.id === null) {
    // The answer to a typed /switch went with the old socket: where it led is unknown.
    state.attaching = null;
    withdrawOutbox();
  }
  let id = storedSessionId();
  const fresh = !id;
  if (fresh) {
    id = newSessionId();
    storeSessionId(id);
  }
  const target = asked && asked.id === id ? asked : { id, from: null, fresh, answered: false, error: null };
  attach(target, { type: "reconnect", sessionId: id });
}

function switchTo(id) {
  if (!id) return;
  compare.close();
  showWorkspace();
  if (id === state.sessionId) return;
  if (!openSession(id)) toast("Not connected: the page switches as soon as the server is back.", { kind: "warn" });
}

function newSession({ keepOutbox = false } = {}) {
  compare.close();
  showWorkspace();
  // The agent chosen in the sidebar runs it: its first message names it (recorded then).
  const chosen = $("new-agent").value;
  openSession(newSessionId(), { fresh: true, keepOutbox });
  state.newAgent = chosen && chosen !== "default" ? chosen : null;
  renderHeader();
  composer.focus();
}

/** The agents a session may run here: the sidebar's choice for a new session, shown only when
 * the server declares some (docs/agents.md). */
async function loadAgents() {
  let agents = [];
  try {
    agents = (await api("/agents")).agents || [];
  } catch (e) {
    return; // an older server, or offline: xclaw's own agent only
  }
  state.agents = agents;
  const select = $("new-agent");
  select.replaceChildren(...agents.map((a) => h("option", {
    value: a.name, text: a.name, title: a.description || "",
  })));
  $("agent-choice").hidden = agents.length < 2;
}

/** Typed while attaching: shown now (marked waiting), sent once attached. `queue`: Queue
 * (Alt+Enter) was pressed, offered since the waiting message locked the composer — it goes
 * with `busy: "queue"`, after the message before it, never ahead of it. */
function holdMessage(text, cmd, { queue = false } = {}) {
  const el = cmd ? commandLine(text) : transcript.user(text);
  el.classList.add("waiting");
  if (queue) el.classList.add("queued");
  state.outbox.push({ text, el, queue });
  if (cmd || queue) return;
  setBusy(true);
  state.heldBusyEpoch = state.busyEpoch;
}

/** Busy because of a run the gateway reported, not only because a held message waits. */
function runInFlight() {
  return state.busy && state.busyEpoch !== state.heldBusyEpoch;
}

function sendOutbox() {
  let started = false; // a message sent here started a run
  while (state.outbox.length && !state.attaching) {
    const { text, el, queue } = state.outbox[0];
    if (queue) {
      // The session's queue lists it once the gateway has it (a `queue` frame).
      state.outbox.shift();
      el.remove();
      socket.send({ type: "message", sessionId: state.sessionId, content: text, busy: "queue" });
      continue;
    }
    if (started) break; // one run at a time: anything else after it goes back to the box
    // A run in flight here (resumed on attach) would refuse it as `busy`: back to the box.
    if (!command(text) && runInFlight()) break;
    state.outbox.shift();
    el.classList.remove("waiting");
    deliver(text, el);
    if (!command(text)) started = true;
  }
  if (!state.attaching) withdrawOutbox(); // else it waits for the attach a command began
}

function withdrawOutbox() {
  const back = state.outbox;
  if (!back.length) return;
  state.outbox = [];
  if (state.busy && !runInFlight()) setBusy(false); // the lock was the held message's own
  for (const m of back) m.el.remove();
  composer.putBack(back.map((m) => m.text).join("\n"));
}

async function renameSession(s) {
  const title = await promptDialog({
    title: "Rename session", label: "Title", value: s.title || "", confirmLabel: "Rename", placeholder: "What is this session about?",
  });
  if (title === null) return;
  try {
    const updated = await sessionsApi.rename(s.sessionId, title);
    sidebar.patch(s.sessionId, { title, updatedAt: updated?.updatedAt ?? s.updatedAt });
    if (s.sessionId === state.sessionId) state.session = { ...state.session, title };
    renderHeader();
  } catch (e) {
    handleApiError(e);
  }
}

async function deleteSession(s) {
  const forks = state.sessions.filter((x) => x.parentSessionId === s.sessionId).length;
  const ok = await confirmDialog({
    title: `Delete “${sessionTitle(s)}”?`,
    body: [
      h("p", { text: "The session and every recorded step are deleted. This cannot be undone." }),
      forks ? h("p", { text: `Its ${forks} fork${forks === 1 ? "" : "s"} stay${forks === 1 ? "s" : ""}: a fork keeps its own copy of the history.` }) : null,
    ],
    confirmLabel: "Delete",
    danger: true,
  });
  if (!ok) return;
  try {
    await sessionsApi.remove(s.sessionId);
    toast(`Deleted “${sessionTitle(s)}”`);
    await refreshSessions();
    if (s.sessionId === state.sessionId) {
      const next = state.sessions.slice().sort((a, b) => b.updatedAt - a.updatedAt)[0];
      state.sessionId = null;
      if (next) switchTo(next.sessionId);
      else newSession();
    }
  } catch (e) {
    handleApiError(e);
  }
}

// --- trace ----------------------------------------------------------------------------------------

async function reloadTrace() {
  const sid = state.sessionId;
  if (!sid || state.unsaved) return; // a session not written yet has no trace to fetch
  reloadProcesses(sid);
  const since = performance.now();
  try {
    const tree = await sessionsApi.tree(sid);
    if (sid === state.sessionId) trace.load(tree, since);
  } catch (e) {
    handleApiError(e, { quiet: true });
  }
}

/** The processes its commands left running: asked again whenever the trace is (an attach,
 * the end of a run, a rollback). */
async function reloadProcesses(sid) {
  try {
    await processes.reload(sid, () => sid === state.sessionId);
  } catch (e) {
    handleApiError(e, { quiet: true });
  }
  try {
    await schedules.reload(sid, () => sid === state.sessionId);
  } catch (e) {
    handleApiError(e, { quiet: true });
  }
}

// --- compare ----------------------------------------------------------------------------------

async function openCompare(preferId) {
  await refreshSessions();
  $("workspace").hidden = true;
  $("compare-btn").setAttribute("aria-pressed", "true");
  await compare.open(state.sessions, state.sessionId);
  if (preferId && preferId !== compare.right && preferId !== compare.left) {
    compare.right = preferId;
    await compare.render();
  }
}

function showWorkspace() {
  $("workspace").hidden = false;
  $("compare").hidden = true;
  $("compare-btn").setAttribute("aria-pressed", "false");
}

// --- errors ---------------------------------------------------------------------------------------

function handleApiError(e, { quiet = false } = {}) {
  if (e instanceof Unauthorized) return showAccess("wrong");
  if (quiet) return;
  const text = e instanceof ApiError ? e.message : String(e);
  toast(text, { kind: "error", timeout: 9000 });
}

// --- wiring -------------------------------------------------------------------------------------

/** A slash command's word and the rest ("/new Title" -> ["new", "Title"]), or null. */
function command(text) {
  const cmd = /^\/(\w+)(?:\s+(.*))?$/s.exec(text);
  return cmd ? [cmd[1], (cmd[2] || "").trim()] : null;
}

function commandLine(text) {
  return transcript.add(h("div.command-line", h("span.prompt", { text: "›" }), h("code", { text })), { force: true });
}

function sendMessage(text) {
  if (!socket.open) {
    toast("Not connected yet — try again in a moment.", { kind: "warn" });
    return false;
  }
  const cmd = command(text);
  if (state.attaching) holdMessage(text, cmd);
  else deliver(text, cmd ? commandLine(text) : transcript.user(text));
  return true;
}

/** Send what was typed while a run is in flight, to wait its turn in the session's queue:
 * the `queue` frame that follows lists it (not the transcript: it is no message yet). */
function queueMessage(text) {
  if (!socket.open) {
    toast("Not connected yet — try again in a moment.", { kind: "warn" });
    return false;
  }
  if (command(text)) return sendMessage(text); // a command runs now, as ever
  // Attaching (a message typed meanwhile waits): this one waits behind it, not ahead.
  if (state.attaching) {
    holdMessage(text, null, { queue: true });
    return true;
  }
  return socket.send({ type: "message", sessionId: state.sessionId, content: text, busy: "queue" });
}

/** Send what was typed (already shown as `el`) to the session the page is on. */
function deliver(text, el) {
  const cmd = command(text);
  if (cmd && cmd[0] === "new" && !cmd[1]) {
    el.remove();
    newSession({ keepOutbox: true }); // the New session button's, at once
    return;
  }
  const frame = { type: "message", sessionId: state.sessionId, content: text };
  // A new session's first message names the agent chosen for it (recorded with it).
  if (!cmd && state.unsaved && state.newAgent) frame.agent = state.newAgent;
  // /switch ID (existing sessions, unique prefixes) and /new TITLE are the gateway's: it
  // re-attaches this socket and its `session` frame switches the page.
  if (cmd && (cmd[0] === "switch" || cmd[0] === "new")) {
    compare.close();
    showWorkspace();
    attach({ id: null, from: null, fresh: false, answered: false, error: null }, frame);
    return;
  }
  socket.send(frame);
  // The gateway names a session after its first message (a `renamed` frame follows).
  if (!cmd) setBusy(true);
}

function fillIcons(root) {
  for (const el of root.querySelectorAll("[data-icon]")) el.replaceChildren(icon(el.dataset.icon, { size: 16 }));
}

// Below this width the trace opens over the conversation (style.css): closed at first there.
const TRACE_OVER_CHAT = "(max-width: 980px)";

function setupTraceToggle() {
  const panel = $("trace-panel");
  const button = $("trace-toggle");
  const show = (open) => {
    panel.hidden = !open;
    button.setAttribute("aria-pressed", String(open));
  };
  const apply = (open) => {
    show(open);
    localStorage.setItem("xclaw_trace_open", open ? "1" : "0");
  };
  const kept = localStorage.getItem("xclaw_trace_open");
  show(kept === null ? !window.matchMedia(TRACE_OVER_CHAT).matches : kept !== "0");
  button.addEventListener("click", () => apply(panel.hidden));
  return apply;
}

/** The trace panel's width: dragged (or arrow keys on the handle), kept in localStorage. */
function setupTraceResizer() {
  const handle = $("trace-resizer");
  const workspace = $("workspace");
  const apply = (px) => {
    // The chat keeps 480 px: its composer's placeholder, Stop and Send must still fit.
    const max = Math.max(300, workspace.getBoundingClientRect().width - 480);
    const width = Math.round(Math.min(Math.max(px, 280), max));
    workspace.style.setProperty("--trace-width", fitted(width));
    localStorage.setItem("xclaw_trace_width", String(width));
  };
  // A width dragged on a wide window must not squeeze the chat on a narrower one.
  const fitted = (px) => `min(${px}px, max(280px, calc(100% - 480px)))`;
  const saved = Number(localStorage.getItem("xclaw_trace_width"));
  if (saved > 0) workspace.style.setProperty("--trace-width", fitted(saved));
  handle.addEventListener("pointerdown", (e) => {
    e.preventDefault();
    handle.setPointerCapture(e.pointerId);
    handle.classList.add("dragging");
    const move = (ev) => apply(workspace.getBoundingClientRect().right - ev.clientX);
    const up = () => {
      handle.classList.remove("dragging");
      handle.removeEventListener("pointermove", move);
      handle.removeEventListener("pointerup", up);
    };
    handle.addEventListener("pointermove", move);
    handle.addEventListener("pointerup", up);
  });
  handle.addEventListener("keydown", (e) => {
    const step = e.shiftKey ? 80 : 20;
    const now = $("trace-panel").getBoundingClientRect().width;
    if (e.key === "ArrowLeft") apply(now + step);
    else if (e.key === "ArrowRight") apply(now - step);
    else return;
    e.preventDefault();
  });
}

async function exportSession() {
  if (!state.sessionId) return;
  try {
    const response = await sessionsApi.exportLines(state.sessionId);
    const blob = await response.blob();
    const link = h("a", { href: URL.createObjectURL(blob), download: `xclaw-${state.sessionId}.jsonl` });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 5000);
  } catch (e) {
    handleApiError(e);
  }
}

async function boot() {
  adoptUrlParams();
  setupAccessForm();
  let health = null;
  try {
    health = await api("/health");
  } catch (e) {
    // No token: the access screen, unless a sign-on proxy in front vouched for the person
    // (docs/teams.md) and the server let the request in without one.
    if (e instanceof Unauthorized) return showAccess(getToken() ? "wrong" : "missing");
    if (!getToken()) return showAccess("missing");
    // Server down right now: show the app anyway; the socket keeps trying.
  }
  $("access").hidden = true;
  $("app").hidden = false;
  fillIcons(document);
  if (health) {
    state.me = health.user || null;
    if (state.me) {
      $("whoami").hidden = false;
      $("whoami").textContent = `signed in as ${state.me} · ${health.role}`;
    }
    $("version").textContent = health.version ? `v${health.version}` : "";
    $("model").textContent = health.model ? `model · ${health.model}` : "no model configured";
    $("model").title = health.model || "set ANTHROPIC_API_KEY / OPENAI_API_KEY in .env, or XCLAW_MODEL";
  }

  transcript = new Transcript($("transcript"), $("messages"));
  transcript.me = state.me;
  transcript.reset();
  queueList = new QueueList($("queue"), {
    onCancel: (id) => socket.send({ type: "message", sessionId: state.sessionId, content: `/unqueue ${id}` }),
  });
  composer = new Composer($("composer"), {
    onSend: sendMessage,
    onQueue: queueMessage,
    onCancel: () => {
      if (!state.outbox.length) return socket.send({ type: "cancel", sessionId: state.sessionId });
      withdrawOutbox(); // not sent yet: Stop takes it back
      setBusy(false);
    },
  });
  trace = new TraceTree($("trace"), $("trace-stats"), { onRollback: (step) => rollbackTo(app, step), onFork: (step) => forkFrom(app, step) });
  processes = new ProcessList($("processes"));
  schedules = new ScheduleList($("schedules"));
  sidebar = new Sidebar($("session-list"), $("session-filter"), {
    onSwitch: switchTo, onRename: renameSession, onDelete: deleteSession,
  });
  compare = new CompareView($("compare"), {
    onClose: showWorkspace,
    onSwitch: (id) => switchTo(id),
    onError: handleApiError,
  });
  const toggleTrace = setupTraceToggle();
  setupTraceResizer();

  $("new-session").addEventListener("click", newSession);
  $("session-title").addEventListener("click", () => {
    const s = sidebar.get(state.sessionId);
    if (s) renameSession(s);
  });
  $("compare-btn").addEventListener("click", () => openCompare());
  $("expand-all").addEventListener("click", () => trace.setAllCollapsed(false));
  $("collapse-all").addEventListener("click", () => trace.setAllCollapsed(true));
  $("export").addEventListener("click", exportSession);
  document.addEventListener("keydown", (e) => {
    if (e.altKey && e.key.toLowerCase() === "n") { e.preventDefault(); newSession(); }
    if (e.altKey && e.key.toLowerCase() === "t") { e.preventDefault(); toggleTrace($("trace-panel").hidden); }
    if (e.key === "Escape" && !$("compare").hidden && !document.querySelector("dialog[open]")) showWorkspace();
  });
  window.addEventListener("online", () => socket.retryNow());

  socket = new Socket(wsUrl, {
    onOpen: onSocketOpen,
    onFrame,
    onState: setConnection,
    onUnauthorized: () => showAccess("wrong"),
  });
  composer.render();
  socket.connect();
  refreshSessions();
  loadAgents();
  composer.focus();
}

// Exposed for the browser tests and for curious people in the dev tools; not an API.
window.xclaw = { state };

boot();
