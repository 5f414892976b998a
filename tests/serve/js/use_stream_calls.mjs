// Drive a nodestep server with the LangGraph JS client, making the calls useStream makes:
// threads.create, runs.stream with ["values", "messages-tuple", "custom"], streamResumable
// and onDisconnect, getHistory for the thread head and its interrupts, a resume command,
// joinStream from Last-Event-ID -1, cancel and delete. Prints one JSON report.
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.argv[2] });
const report = {};

async function collect(stream) {
  const parts = [];
  for await (const part of stream) parts.push({ event: part.event, data: part.data });
  return parts;
}

const thread = await client.threads.create({ metadata: { from: "js" } });
const tid = thread.thread_id;
let created = null;
const parts = await collect(
  client.runs.stream(tid, "chat", {
    input: { messages: [{ id: "js-1", type: "human", content: [{ type: "text", text: "hi from js" }] }] },
    streamMode: ["values", "messages-tuple", "custom"],
    streamResumable: true,
    onDisconnect: "continue",
    onRunCreated(params) { created = params; },
  }),
);
report.events = parts.map((p) => p.event);
report.created = created;
const chunks = parts.filter((p) => p.event === "messages").map((p) => p.data);
report.chunkIds = [...new Set(chunks.map(([chunk]) => chunk.id))];
report.chunkTypes = [...new Set(chunks.map(([chunk]) => chunk.type))];
report.chunkNodes = [...new Set(chunks.map(([, meta]) => meta.langgraph_node))];
report.text = chunks.map(([chunk]) => chunk.content).join("");
const finalValues = parts.filter((p) => p.event === "values").at(-1).data;
report.messages = finalValues.messages.map((m) => [m.type, m.id, m.content]);

const history = await client.threads.getHistory(tid, { limit: 10 });
const state = await client.threads.getState(tid);
report.headIsState = history[0].checkpoint.checkpoint_id === state.checkpoint.checkpoint_id;
report.headNext = history[0].next;
report.linked = history.slice(0, -1).every((h, i) => h.parent_checkpoint?.checkpoint_id === history[i + 1].checkpoint.checkpoint_id);

const approval = await client.threads.create();
const paused = await collect(
  client.runs.stream(approval.thread_id, "approval", {
    input: { request: "leave" },
    streamMode: ["values", "messages-tuple", "custom"],
    streamResumable: true,
    onDisconnect: "continue",
  }),
);
report.pausedLast = paused.at(-1).data.__interrupt__;
const head = (await client.threads.getHistory(approval.thread_id, { limit: 10 }))[0];
report.headInterrupts = head.tasks.flatMap((t) => t.interrupts);
let runId = null;
const resumed = await collect(
  client.runs.stream(approval.thread_id, "approval", {
    command: { resume: "granted" },
    streamMode: ["values"],
    streamResumable: true,
    onRunCreated(params) { runId = params.run_id; },
  }),
);
report.resumedLast = resumed.at(-1).data;
const joined = await collect(client.runs.joinStream(approval.thread_id, runId, { lastEventId: "-1" }));
report.joinedEvents = joined.map((p) => p.event);

const slow = await client.runs.create(approval.thread_id, "approval", { input: { request: "again" } });
await client.runs.cancel(approval.thread_id, slow.run_id);
report.cancelled = true;
await client.threads.delete(tid);
report.deleted = true;
console.log(JSON.stringify(report));
