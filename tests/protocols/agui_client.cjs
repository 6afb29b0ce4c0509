// One AG-UI run with the official client (@ag-ui/client's HttpAgent), for the tests.
//
//   node agui_client.cjs '{"url":..., "token":..., "threadId":..., "state":FILE, "do":...}'
//
// The client's own state (its messages, the interrupts it must answer) lives in FILE between
// runs, so a test can kill the gateway between two runs as a browser tab would outlive it.
// `do`: {"say": TEXT} adds a user message; {"answer": {ID: true|false}} answers the pending
// interrupts; {"toolResult": {"callId": ID, "content": TEXT}} adds a tool message; {} just
// runs again (a reconnect). `tools`: front-end tools to declare. `abortAfter`: abort the run
// (a dropped stream) once that many events came. `touch`: a file written as the first event
// comes (the stream is open: a test's gate). Prints one JSON object on stdout.
const fs = require("fs");
const { HttpAgent, buildResumeArray } = require("@ag-ui/client");
const { randomUUID } = require("crypto");

async function main() {
  const a = JSON.parse(process.argv[2]);
  const saved = fs.existsSync(a.state) ? JSON.parse(fs.readFileSync(a.state, "utf8")) : {};
  const agent = new HttpAgent({
    url: a.url,
    headers: { Authorization: `Bearer ${a.token}` },
    threadId: a.threadId,
    initialMessages: saved.messages || [],
  });
  agent.pendingInterrupts = saved.pendingInterrupts || [];
  const act = a.do || {};
  const params = { tools: a.tools || [] };
  if (act.forwardedProps !== undefined) {
    params.forwardedProps = act.forwardedProps;
  }
  if (act.say !== undefined) {
    agent.addMessage({ id: randomUUID(), role: "user", content: act.say });
  }
  if (act.toolResult !== undefined) {
    agent.addMessage({
      id: randomUUID(),
      role: "tool",
      toolCallId: act.toolResult.callId,
      content: act.toolResult.content,
    });
  }
  if (act.answer !== undefined) {
    const responses = {};
    for (const [id, approved] of Object.entries(act.answer)) {
      responses[id] = { status: "resolved", payload: { approved } };
    }
    params.resume = buildResumeArray(agent.pendingInterrupts, responses);
  }
  const events = [];
  let outcome = null;
  let error = null;
  let result;
  try {
    const run = await agent.runAgent(params, {
      onEvent: ({ event }) => {
        events.push(event);
        if (a.touch !== undefined && events.length === 1) {
          fs.writeFileSync(a.touch, "");
        }
        if (a.abortAfter !== undefined && events.length >= a.abortAfter) {
          agent.abortRun();
        }
      },
      onRunFinishedEvent: ({ event }) => {
        outcome = event.outcome || { type: "success" };
      },
      onRunErrorEvent: ({ event }) => {
        error = { message: event.message, code: event.code };
      },
    });
    result = run.result;
  } catch (e) {
    error = error || { message: String((e && e.message) || e), status: e && e.status };
  }
  fs.writeFileSync(
    a.state,
    JSON.stringify({ messages: agent.messages, pendingInterrupts: agent.pendingInterrupts }),
  );
  process.stdout.write(
    JSON.stringify({
      events,
      outcome,
      error,
      result,
      messages: agent.messages,
      pendingInterrupts: agent.pendingInterrupts,
    }) + "\n",
  );
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ crashed: String((e && e.stack) || e) }) + "\n");
  process.exit(1);
});
