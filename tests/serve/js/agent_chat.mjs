// Chat with a served nodestep Agent through the LangGraph JS client, as a chat UI built on
// useStream does: the user's message as input, ["values", "messages-tuple"] streamed, then
// the thread's state. Prints one JSON report.
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.argv[2] });
const thread = await client.threads.create();
const parts = [];
for await (const part of client.runs.stream(thread.thread_id, "helper", {
  input: { messages: [{ type: "human", content: "who is user 7?" }] },
  streamMode: ["values", "messages-tuple"],
  streamResumable: true,
  onDisconnect: "continue",
})) {
  parts.push({ event: part.event, data: part.data });
}
const chunks = parts.filter((p) => p.event === "messages").map((p) => p.data[0]);
const last = parts.filter((p) => p.event === "values").at(-1).data;
const state = await client.threads.getState(thread.thread_id);
const report = {
  text: chunks.map((chunk) => chunk.content).join(""),
  chunkIds: [...new Set(chunks.filter((c) => c.content).map((chunk) => chunk.id))],
  messages: last.messages.map((m) => [m.type, m.id, m.content]),
  toolCalls: last.messages.flatMap((m) => (m.tool_calls || []).map((c) => c.name)),
  stateMessages: state.values.messages.map((m) => m.id),
};
console.log(JSON.stringify(report));
