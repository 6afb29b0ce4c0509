// An editor written on the official TypeScript ACP SDK (@agentclientprotocol/sdk, npm):
// spawns `xclaw acp` (the command after `--`), and either
//   new CWD TEXT      opens a session in CWD, prompts TEXT, allows every permission asked
//   load CWD SESSION  loads SESSION (its history replayed) and waits for the run to settle
// then prints one JSON line: what the agent answered and every session/update kind seen.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { client, methods, ndJsonStream } from "@agentclientprotocol/sdk";

const sep = process.argv.indexOf("--");
const [mode, cwd, arg] = process.argv.slice(2, sep);
const [cmd, ...args] = process.argv.slice(sep + 1);

const child = spawn(cmd, args, { cwd, stdio: ["pipe", "pipe", "inherit"] });
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const updates = [];
const asked = [];
let text = "";

const app = client({ name: "xclaw-node-test" })
  .onNotification(methods.client.session.update, ({ params }) => {
    const u = params.update;
    updates.push(u.sessionUpdate);
    if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") text += u.content.text;
  })
  .onRequest(methods.client.session.requestPermission, ({ params }) => {
    asked.push(params.toolCall.title);
    const allow = params.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  });

const out = await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
  if (mode === "new") {
    const s = await ctx.request(methods.agent.session.new, { cwd, mcpServers: [] });
    const r = await ctx.request(methods.agent.session.prompt, {
      sessionId: s.sessionId,
      prompt: [{ type: "text", text: arg }],
    });
    return { sessionId: s.sessionId, stopReason: r.stopReason, loadSession: init.agentCapabilities.loadSession };
  }
  await ctx.request(methods.agent.session.load, { sessionId: arg, cwd, mcpServers: [] });
  const replayed = updates.length;
  const listed = await ctx.request(methods.agent.session.list, { cwd });
  return { replayed, listed: listed.sessions.map((s) => s.sessionId) };
});
console.log(JSON.stringify({ ...out, updates, asked, text }));
child.stdin.end();
child.kill();
process.exit(0);
