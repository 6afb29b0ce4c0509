// A terminal chat with an xclaw gateway over AG-UI, on the official client
// (@ag-ui/client's HttpAgent): text streams as it comes, tool calls and their results are
// shown, and an approval (an AG-UI interrupt) is asked on the terminal and answered by the
// next run. See docs/ag-ui.md.
//
//   npm install @ag-ui/client@1.0.0
//   node chat.mjs http://127.0.0.1:3000 TOKEN [THREAD] [--yes]
//
// THREAD is the xclaw session (a new one when omitted). --yes approves every interrupt
// without asking (for scripts). A line ending the input (Ctrl+D) quits.
import { HttpAgent, buildResumeArray } from "@ag-ui/client";
import { randomUUID } from "node:crypto";
import * as readline from "node:readline/promises";

const [url, token, thread, ...flags] = process.argv.slice(2);
if (!url || !token) {
  console.error("usage: node chat.mjs URL TOKEN [THREAD] [--yes]");
  process.exit(2);
}
const yes = flags.includes("--yes") || thread === "--yes";
const agent = new HttpAgent({
  url: `${url.replace(/\/$/, "")}/agui`,
  headers: { Authorization: `Bearer ${token}` },
  threadId: thread && thread !== "--yes" ? thread : randomUUID(),
});
const terminal = readline.createInterface({ input: process.stdin, output: process.stdout });

// What the run says, as it says it.
const show = {
  onTextMessageContentEvent: ({ event }) => process.stdout.write(event.delta),
  onTextMessageEndEvent: () => process.stdout.write("\n"),
  onToolCallEndEvent: ({ toolCallName, toolCallArgs }) =>
    console.log(`[tool] ${toolCallName} ${JSON.stringify(toolCallArgs)}`),
  onToolCallResultEvent: ({ event }) => console.log(`[result] ${String(event.content).slice(0, 200)}`),
  onRunErrorEvent: ({ event }) => console.log(`[error] ${event.message}`),
};

async function run(params) {
  await agent.runAgent(params, show);
  // An approval ends the run as an interrupt; the next run carries the answers.
  while (agent.pendingInterrupts.length > 0) {
    const answers = {};
    for (const interrupt of agent.pendingInterrupts) {
      const ok = yes || /^y/i.test(await terminal.question(`[approve?] ${interrupt.message} (y/n) `));
      answers[interrupt.id] = { status: "resolved", payload: { approved: ok } };
    }
    await agent.runAgent({ resume: buildResumeArray(agent.pendingInterrupts, answers) }, show);
  }
}

console.log(`thread ${agent.threadId}`);
for (;;) {
  let text;
  try {
    text = await terminal.question("> ");
  } catch {
    break; // input closed
  }
  if (!text.trim()) continue;
  agent.addMessage({ id: randomUUID(), role: "user", content: text });
  await run({});
}
terminal.close();
