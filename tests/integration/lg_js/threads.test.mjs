// The /lg threads API driven by the real @langchain/langgraph-sdk (run by
// tests/integration/test_langgraph_js.py, which starts the gateway and sets LG_URL and LG_KEY).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.LG_URL, apiKey: process.env.LG_KEY });
const ask = (text) => ({ messages: [{ role: "user", content: text }] });

test("metadata search, history paging and a checkpoint's state", async () => {
  const thread = await client.threads.create({ metadata: { owner: "js", topic: "geo" } });
  await client.threads.create({ metadata: { owner: "someone else" } });
  const found = await client.threads.search({ metadata: { owner: "js" } });
  assert.deepEqual(found.map((t) => t.thread_id), [thread.thread_id]);

  const runIds = [];
  for (const question of ["First?", "Second?"]) {
    const run = await client.runs.create(thread.thread_id, "chat-direct", { input: ask(question) });
    await client.runs.join(thread.thread_id, run.run_id);
    runIds.push(run.run_id);
  }
  const history = await client.threads.getHistory(thread.thread_id, { limit: 10 });
  // Each turn's question, then the turn itself (its checkpoint id is its run's), after the thread's start.
  assert.deepEqual(history.map((s) => s.metadata.run_id ?? null), [runIds[1], runIds[1], runIds[0], runIds[0], null]);
  assert.equal(history[0].checkpoint.checkpoint_id, runIds[1]);
  assert.equal(history[1].parent_checkpoint.checkpoint_id, runIds[0]);
  assert.deepEqual(history.map((s) => s.values.messages.length), [4, 3, 2, 1, 0]);
  const older = await client.threads.getHistory(thread.thread_id, { limit: 1, before: history[0].checkpoint });
  assert.deepEqual(older.map((s) => s.checkpoint.checkpoint_id), [history[1].checkpoint.checkpoint_id]);
  const first = await client.threads.getState(thread.thread_id, runIds[0]);
  assert.deepEqual(first.values.messages.map((m) => m.content), ["First?", "One."]);
  assert.equal((await client.threads.get(thread.thread_id)).metadata.assistant_id, "chat-direct");
});

test("a stateless background run", async () => {
  const run = await client.runs.create(null, "chat-direct", { input: ask("Alone?"), onCompletion: "keep" });
  const values = await client.runs.join(run.thread_id, run.run_id);
  assert.equal(values.messages.at(-1).content, "Three.");
});

test("a run from an older checkpoint branches, streamed in the extra modes", async () => {
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "chat-direct", { input: ask("A?") });
  const first = (await client.threads.getState(thread.thread_id)).checkpoint.checkpoint_id;
  await client.runs.wait(thread.thread_id, "chat-direct", { input: ask("B?") });
  const seen = [];
  for await (const part of client.runs.stream(thread.thread_id, "chat-direct", {
    input: ask("B again?"), checkpoint: { checkpoint_id: first, checkpoint_ns: "" },
    streamMode: ["messages", "events", "tasks", "checkpoints", "debug"],
  })) seen.push(part);
  const names = new Set(seen.map((p) => p.event));
  for (const name of ["messages/partial", "messages/complete", "events", "tasks", "checkpoints", "debug"]) {
    assert.ok(names.has(name), name);
  }
  const checkpoint = seen.filter((p) => p.event === "checkpoints").at(-1).data;  // the turn's own, after its question's
  assert.deepEqual(checkpoint.values.messages.map((m) => m.content), ["A?", "Four.", "B again?", "Six."]);
  const history = await client.threads.getHistory(thread.thread_id, { limit: 10 });
  assert.equal(history.length, 7);  // the start, then a question and an answer per turn
  const byId = (id) => history.find((s) => s.checkpoint.checkpoint_id === id);
  const asked = byId(checkpoint.parent_config.configurable.checkpoint_id);  // "B again?", before its answer
  assert.equal(asked.parent_checkpoint.checkpoint_id, first);
  const original = history.find((s) => s.values.messages.some((m) => m.content === "B?"));
  // the original branch is kept
  assert.equal(byId(original.parent_checkpoint.checkpoint_id).parent_checkpoint.checkpoint_id, first);
});
