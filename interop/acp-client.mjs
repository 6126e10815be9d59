// Drives a stdio ACP agent with the official TypeScript ACP client
// (@agentclientprotocol/sdk) and prints one JSON summary line. Used by
// agentwire's interoperability tests.
//
//   node acp-client.mjs -- CMD ARGS...
//
// Steps: initialize, session/new, a permission prompt (the client allows),
// a "slow 40" prompt during which the mode changes and the turn is
// cancelled (it must answer stopReason "cancelled").
import * as acp from "@agentclientprotocol/sdk";
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

const [command, ...args] = process.argv.slice(process.argv.indexOf("--") + 1);
const child = spawn(command, args, { stdio: ["pipe", "pipe", "ignore"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const summary = { updates: 0 };
try {
  await acp.client({ name: "peer-acp-client" })
    .onNotification(acp.methods.client.session.update, () => { summary.updates++; })
    .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
      summary.permissionAsked = true;
      return { outcome: { outcome: "selected", optionId: params.options[0].optionId } };
    })
    .connectWith(stream, async (ctx) => {
      const init = await ctx.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
      summary.protocolVersion = init.protocolVersion;
      summary.agent = init.agentInfo?.name;
      const { sessionId } = await ctx.request(acp.methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] });
      summary.sessionId = sessionId;
      const perm = await ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "permission" }] });
      summary.permissionStop = perm.stopReason;
      const slow = ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "slow 40" }] });
      await new Promise((r) => setTimeout(r, 200));
      const started = Date.now();
      await ctx.request(acp.methods.agent.session.setMode, { sessionId, modeId: "code" });
      summary.setModeMs = Date.now() - started;
      try {
        await ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "again" }] });
        summary.secondPrompt = "accepted";
      } catch (e) {
        summary.secondPrompt = e.code;
      }
      await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
      summary.slowStop = (await slow).stopReason;
    });
  summary.ok = true;
} catch (e) {
  summary.ok = false;
  summary.error = String(e?.message ?? e);
}
child.stdin.end();
const code = await new Promise((r) => child.on("exit", (c) => r(c)));
summary.agentExit = code;
console.log(JSON.stringify(summary));
process.exit(summary.ok ? 0 : 1);
