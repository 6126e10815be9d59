#!/usr/bin/env node
// A small ACP agent on the official TypeScript SDK
// (@agentclientprotocol/sdk 2.4.0, its /unstable entrypoint for MCP over
// ACP), used by agentwire's interoperability tests so that agentwire's ACP
// client serves files, terminals and MCP servers to an agent it did not
// write. The prompt's text is a command; the agent answers each one with a
// single agent_message_chunk whose text is one JSON object, and the turn
// ends with end_turn (or cancelled):
//
//   caps                   the clientCapabilities the client declared
//   read PATH [LINE LIMIT] fs/read_text_file  -> {"content"} or {"error"}
//   write PATH TEXT...     fs/write_text_file -> {"written"} or {"error"}
//   run CMD ARGS...        terminal/create, terminal/wait_for_exit,
//                          terminal/output, terminal/release
//                          -> {"exitStatus","output","truncated"} or {"error"}
//   kill CMD ARGS...       the same, with terminal/kill before the wait
//   slow N                 N chunks "tick i" every 50 ms; session/cancel
//                          (or $/cancel_request) ends it with "cancelled"
//   mcp NAME TOOL [JSON]   tools/call on the MCP server the session
//                          declared as {"type":"acp","name":NAME}, through
//                          the SDK's McpOverAcpCaller (connectionless
//                          mcp/message) -> {"outcome"} or {"error"}
//
//   node acp-agent.mjs     (an ACP agent on stdin/stdout)
import * as acp from "@agentclientprotocol/sdk/unstable";
import { Readable, Writable } from "node:stream";

const tickMs = 50;
let clientCapabilities = {};
const turns = new Map(); // sessionId -> AbortController of the running turn
const servers = new Map(); // sessionId -> its mcpServers entries
let nextSession = 1;

const mcp = new acp.McpOverAcpCaller({ clientInfo: { name: "ts-acp-agent", version: "2.4.0" } });

// errorOf keeps what a test needs from a failed request: the JSON-RPC code
// and message the client answered.
const errorOf = (e) => ({ error: { code: e?.code ?? null, message: String(e?.message ?? e) } });

const sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(t); reject(signal.reason); }, { once: true });
  });

async function runTerminal(client, sessionId, argv, kill, signal) {
  const [command, ...args] = argv;
  const term = await client.createTerminal({ sessionId, command, args, outputByteLimit: 4096 }, { cancellationSignal: signal });
  try {
    if (kill) await term.kill();
    const exitStatus = await term.waitForExit();
    const out = await term.currentOutput();
    return { terminalId: term.id, exitStatus, output: out.output, truncated: out.truncated };
  } finally {
    await term.release();
  }
}

async function answer(client, sessionId, text, signal) {
  const line = text.trim();
  const [verb, ...rest] = line.split(/\s+/);
  // The text of write and the JSON of mcp are the rest of the line, as typed.
  const tail = (n) => line.replace(new RegExp(`^(\\S+\\s+){${n}}`), "");
  const req = (method, params) => client.request(method, { sessionId, ...params }, { cancellationSignal: signal });
  try {
    switch (verb) {
      case "caps":
        return { clientCapabilities };
      case "read": {
        const [path, line, limit] = rest;
        const params = { path };
        if (line) params.line = Number(line);
        if (limit) params.limit = Number(limit);
        const r = await req(acp.methods.client.fs.readTextFile, params);
        return { content: r.content };
      }
      case "write": {
        const [path] = rest;
        await req(acp.methods.client.fs.writeTextFile, { path, content: rest.length > 1 ? tail(2) : "" });
        return { written: path };
      }
      case "run":
      case "kill":
        return await runTerminal(client, sessionId, rest, verb === "kill", signal);
      case "mcp": {
        const [name, tool] = rest;
        const json = rest.length > 2 ? tail(3) : "";
        const server = (servers.get(sessionId) ?? []).find((s) => acp.isMcpServerAcp(s) && s.name === name);
        if (!server) return { error: { code: null, message: `no MCP server ${name} declared over ACP` } };
        const serverId = server.serverId;
        const outcome = await mcp.request(client, serverId, "tools/call",
          { name: tool, arguments: json ? JSON.parse(json) : {} }, { signal });
        return { outcome };
      }
      default:
        return { error: { code: null, message: `unknown command ${JSON.stringify(verb)}` } };
    }
  } catch (e) {
    return errorOf(e);
  }
}

const say = (client, sessionId, text) =>
  client.notify(acp.methods.client.session.update, {
    sessionId,
    update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
  });

const app = acp
  .agent({ name: "ts-acp-agent" })
  .onRequest(acp.methods.agent.initialize, ({ params }) => {
    clientCapabilities = params.clientCapabilities ?? {};
    return {
      protocolVersion: acp.PROTOCOL_VERSION,
      agentCapabilities: { loadSession: false, mcpCapabilities: { acp: true } },
      authMethods: [],
      agentInfo: { name: "ts-acp-agent", version: "2.4.0" },
    };
  })
  .onRequest(acp.methods.agent.session.new, ({ params }) => {
    const sessionId = `ts-${nextSession++}`;
    servers.set(sessionId, params.mcpServers);
    return { sessionId };
  })
  .onRequest(acp.methods.agent.session.setMode, () => ({}))
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client, signal }) => {
    const { sessionId } = params;
    if (turns.has(sessionId)) {
      throw new acp.RequestError(-32000, "prompt already running", { reason: "prompt_in_progress" });
    }
    const turn = new AbortController();
    const abort = () => turn.abort(new Error("cancelled"));
    if (signal.aborted) abort();
    signal.addEventListener("abort", abort, { once: true }); // $/cancel_request, EOF
    turns.set(sessionId, turn);
    try {
      const text = params.prompt.filter((b) => b.type === "text").map((b) => b.text).join(" ");
      const slow = /^slow\s+(\d+)$/.exec(text.trim());
      if (slow) {
        for (let i = 1; i <= Number(slow[1]); i++) {
          await say(client, sessionId, `tick ${i}\n`);
          await sleep(tickMs, turn.signal);
        }
      } else {
        await say(client, sessionId, JSON.stringify(await answer(client, sessionId, text, turn.signal)) + "\n");
      }
      return { stopReason: turn.signal.aborted ? "cancelled" : "end_turn" };
    } catch (e) {
      if (turn.signal.aborted) return { stopReason: "cancelled" };
      throw e;
    } finally {
      turns.delete(sessionId);
    }
  })
  .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
    turns.get(params.sessionId)?.abort(new Error("cancelled"));
  })
  .onNotification(acp.methods.agent.mcp.message, mcp.handleNotification);

app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
