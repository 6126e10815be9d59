#!/usr/bin/env node
// The TypeScript ACP SDK's example agent, ported to the SDK version pinned
// here (@agentclientprotocol/sdk 2.4.0). It is a port, not a copy of a
// published file: the package leaves its examples out of npm
// ("files": ["!dist/examples"]), and upstream's src/examples/agent.ts at
// agentclientprotocol/typescript-sdk@4d5f0de is written against the 0.x
// AgentSideConnection class, which 2.x removed. The wire behaviour is the
// same, step for step and string for string:
//
//   1. an agent_message_chunk ("I'll help you with that. ...");
//   2. a read tool_call (call_1, pending), then its tool_call_update
//      (completed, with the README text);
//   3. another agent_message_chunk (" Now I understand ...");
//   4. an edit tool_call (call_2, pending) and session/request_permission
//      with the options allow (allow_once, "Allow this change") and reject
//      (reject_once, "Skip this change");
//   5. allow: call_2 completed and " Perfect! I've successfully updated the
//      configuration. The changes have been applied."; reject: " I
//      understand you prefer not to make that change. I'll skip the
//      configuration update."; a cancelled outcome ends the turn quietly
//      (end_turn, as upstream).
//
// A pause of one second (a simulated model call) separates the steps, and a
// session/cancel aborts the turn at the next pause, which then answers
// stopReason "cancelled". The only addition: ACP_EXAMPLE_DELAY_MS sets the
// pause, so that tests need not wait five seconds per turn.
//
//   node acp-example-agent.mjs        (an ACP agent on stdin/stdout)
import * as acp from "@agentclientprotocol/sdk";
import { Readable, Writable } from "node:stream";

const delayMs = Number(process.env.ACP_EXAMPLE_DELAY_MS ?? 1000);

// sessionId -> { pendingPrompt: AbortController | null }
const sessions = new Map();

function simulateModelInteraction(abortSignal) {
  return new Promise((resolve, reject) =>
    setTimeout(() => {
      // In a real agent, you'd pass this abort signal to the LLM client
      if (abortSignal.aborted) {
        reject();
      } else {
        resolve();
      }
    }, delayMs),
  );
}

async function simulateTurn(client, sessionId, abortSignal) {
  const sessionUpdate = (update) =>
    client.notify(acp.methods.client.session.update, { sessionId, update });

  // Send initial text chunk
  await sessionUpdate({
    sessionUpdate: "agent_message_chunk",
    content: {
      type: "text",
      text: "I'll help you with that. Let me start by reading some files to understand the current situation.",
    },
  });

  await simulateModelInteraction(abortSignal);

  // Send a tool call that doesn't need permission
  await sessionUpdate({
    sessionUpdate: "tool_call",
    toolCallId: "call_1",
    title: "Reading project files",
    kind: "read",
    status: "pending",
    locations: [{ path: "/project/README.md" }],
    rawInput: { path: "/project/README.md" },
  });

  await simulateModelInteraction(abortSignal);

  // Update tool call to completed
  await sessionUpdate({
    sessionUpdate: "tool_call_update",
    toolCallId: "call_1",
    status: "completed",
    content: [
      {
        type: "content",
        content: {
          type: "text",
          text: "# My Project\n\nThis is a sample project...",
        },
      },
    ],
    rawOutput: { content: "# My Project\n\nThis is a sample project..." },
  });

  await simulateModelInteraction(abortSignal);

  // Send more text
  await sessionUpdate({
    sessionUpdate: "agent_message_chunk",
    content: {
      type: "text",
      text: " Now I understand the project structure. I need to make some changes to improve it.",
    },
  });

  await simulateModelInteraction(abortSignal);

  // Send a tool call that DOES need permission
  await sessionUpdate({
    sessionUpdate: "tool_call",
    toolCallId: "call_2",
    title: "Modifying critical configuration file",
    kind: "edit",
    status: "pending",
    locations: [{ path: "/project/config.json" }],
    rawInput: {
      path: "/project/config.json",
      content: '{"database": {"host": "new-host"}}',
    },
  });

  // Request permission for the sensitive operation
  const permissionResponse = await client.request(acp.methods.client.session.requestPermission, {
    sessionId,
    toolCall: {
      toolCallId: "call_2",
      title: "Modifying critical configuration file",
      kind: "edit",
      status: "pending",
      locations: [{ path: "/home/user/project/config.json" }],
      rawInput: {
        path: "/home/user/project/config.json",
        content: '{"database": {"host": "new-host"}}',
      },
    },
    options: [
      {
        kind: "allow_once",
        name: "Allow this change",
        optionId: "allow",
      },
      {
        kind: "reject_once",
        name: "Skip this change",
        optionId: "reject",
      },
    ],
  });

  if (permissionResponse.outcome.outcome === "cancelled") {
    return;
  }

  switch (permissionResponse.outcome.optionId) {
    case "allow": {
      await sessionUpdate({
        sessionUpdate: "tool_call_update",
        toolCallId: "call_2",
        status: "completed",
        rawOutput: { success: true, message: "Configuration updated" },
      });

      await simulateModelInteraction(abortSignal);

      await sessionUpdate({
        sessionUpdate: "agent_message_chunk",
        content: {
          type: "text",
          text: " Perfect! I've successfully updated the configuration. The changes have been applied.",
        },
      });
      break;
    }
    case "reject": {
      await simulateModelInteraction(abortSignal);

      await sessionUpdate({
        sessionUpdate: "agent_message_chunk",
        content: {
          type: "text",
          text: " I understand you prefer not to make that change. I'll skip the configuration update.",
        },
      });
      break;
    }
    default:
      throw new Error(`Unexpected permission outcome ${permissionResponse.outcome}`);
  }
}

const app = acp
  .agent({ name: "example-agent" })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: {
      loadSession: false,
    },
  }))
  .onRequest(acp.methods.agent.session.new, () => {
    const sessionId = Array.from(crypto.getRandomValues(new Uint8Array(16)))
      .map((b) => b.toString(16).padStart(2, "0"))
      .join("");
    sessions.set(sessionId, { pendingPrompt: null });
    return { sessionId };
  })
  // No auth needed - return empty response
  .onRequest(acp.methods.agent.authenticate, () => ({}))
  // Session mode changes not implemented in this example
  .onRequest(acp.methods.agent.session.setMode, () => ({}))
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const session = sessions.get(params.sessionId);
    if (!session) {
      throw new Error(`Session ${params.sessionId} not found`);
    }

    session.pendingPrompt?.abort();
    session.pendingPrompt = new AbortController();

    try {
      await simulateTurn(client, params.sessionId, session.pendingPrompt.signal);
    } catch (err) {
      if (session.pendingPrompt.signal.aborted) {
        return { stopReason: "cancelled" };
      }
      throw err;
    }

    session.pendingPrompt = null;
    return { stopReason: "end_turn" };
  })
  .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
    sessions.get(params.sessionId)?.pendingPrompt?.abort();
  });

const input = Writable.toWeb(process.stdout);
const output = Readable.toWeb(process.stdin);
app.connect(acp.ndJsonStream(input, output));
