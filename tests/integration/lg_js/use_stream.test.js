// useStream (@langchain/langgraph-sdk/react) mounted headless (jsdom + React) against Agentix's /lg.
// Run by tests/integration/test_langgraph_js.py, which starts the stack and scripts the model.
import { test } from "node:test";
import assert from "node:assert/strict";
import { JSDOM } from "jsdom";

const dom = new JSDOM("<!doctype html><div id=root></div>", { url: "http://localhost/" });
globalThis.window = dom.window;
globalThis.document = dom.window.document;
globalThis.sessionStorage = dom.window.sessionStorage;
globalThis.IS_REACT_ACT_ENVIRONMENT = false;

const React = await import("react");
const { createRoot } = await import("react-dom/client");
const { useStream } = await import("@langchain/langgraph-sdk/react");
const { Client } = await import("@langchain/langgraph-sdk");

const apiUrl = process.env.LG_URL;
const apiKey = process.env.LG_KEY;
const h = React.createElement;

function Chat({ threadId, assistantId, expose, reconnectOnMount = false, fetchStateHistory = false }) {
  const thread = useStream({ apiUrl, apiKey, assistantId, threadId, messagesKey: "messages", reconnectOnMount,
    fetchStateHistory });
  expose.current = thread;
  return h("ul", { id: "messages" },
    thread.messages.map((m) => h("li", { key: m.id ?? String(m.content), "data-type": m.type },
      typeof m.content === "string" ? m.content : JSON.stringify(m.content))),
    thread.interrupt ? h("li", { id: "interrupt" }, JSON.stringify(thread.interrupt.value)) : null);
}

async function until(check, what) {
  for (let i = 0; i < 600; i++) {
    const found = check();
    if (found) return found;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`never: ${what}; the page shows ${document.getElementById("root").textContent}`);
}

function mount(props) {
  const expose = { current: null };
  const root = createRoot(document.getElementById("root"));
  root.render(h(Chat, { ...props, expose }));
  return { expose, root };
}

const texts = () => [...document.querySelectorAll("#messages li[data-type]")].map((li) => li.textContent);

test("the JS SDK reads assistants and the store", async () => {
  const client = new Client({ apiUrl, apiKey });
  const wf = process.env.WORKFLOW_ID;
  const graph = await client.assistants.getGraph(wf);
  assert.deepEqual(graph.nodes.map((n) => n.id), ["__start__", "in", "draft", "review", "out", "__end__"]);
  const schemas = await client.assistants.getSchemas(wf);
  assert.deepEqual(schemas.input_schema.required, ["text"]);
  assert.equal(await client.assistants.count({ graphId: "workflow" }), 1);
  const made = await client.assistants.create({ graphId: "chat", name: "JS helper",
    config: { configurable: { mode: "direct" } } });
  const picked = await client.assistants.search({ graphId: "chat", sortBy: "name", sortOrder: "asc",
    select: ["assistant_id", "name"] });
  assert.deepEqual(picked.map((a) => Object.keys(a).sort()), picked.map(() => ["assistant_id", "name"]));
  assert.ok(picked.some((a) => a.assistant_id === made.assistant_id));
  await assert.rejects(client.assistants.create({ graphId: "chat", config: { configurable: { tools: [] } } }),
    (err) => err.status === 422 && /tools/.test(err.text ?? err.message));
  await client.assistants.delete(made.assistant_id);
  await client.store.putItem(["notes"], "js", { from: "node" });
  assert.deepEqual((await client.store.getItem(["notes"], "js")).value, { from: "node" });
  const found = await client.store.searchItems(["notes"], { query: "node" });
  assert.deepEqual(found.items.map((i) => i.key), ["js"]);
});

test("useStream loads a thread, sends a message and renders the streamed answer", async () => {
  const { expose, root } = mount({ threadId: process.env.THREAD_ID, assistantId: "chat-direct" });
  await until(() => texts().includes(process.env.FIRST_ANSWER), "the thread's messages");
  assert.deepEqual(texts(), [process.env.FIRST_QUESTION, process.env.FIRST_ANSWER]);
  expose.current.submit({ messages: [{ type: "human", content: "And the second?" }] });
  await until(() => texts().includes(process.env.SECOND_ANSWER), "the streamed answer");
  await until(() => !expose.current.isLoading, "the run's end");
  assert.deepEqual(texts().slice(-2), ["And the second?", process.env.SECOND_ANSWER]);
  root.unmount();
});

test("useStream shows a plan's approval as an interrupt and resumes it", async () => {
  const { expose, root } = mount({ threadId: process.env.PLAN_THREAD_ID, assistantId: "chat-plan" });
  await until(() => expose.current && !expose.current.isLoading, "the empty thread");
  expose.current.submit({ messages: [{ type: "human", content: "Capital of Norway?" }] });
  const shown = await until(() => document.getElementById("interrupt"), "the interrupt");
  assert.match(shown.textContent, /recall the capital/);
  await until(() => !expose.current.isLoading, "the run waiting");
  expose.current.submit(undefined, { command: { resume: "approve" } });
  await until(() => texts().includes(process.env.PLAN_ANSWER), "the answer after the approval");
  await until(() => !expose.current.isLoading && !document.getElementById("interrupt"), "the interrupt gone");
  root.unmount();
});

test("useStream reconnects to the running stream after a reload", async () => {
  const threadId = process.env.SLOW_THREAD_ID;
  let page = mount({ threadId, assistantId: "chat-direct", reconnectOnMount: true });
  await until(() => page.expose.current && !page.expose.current.isLoading, "the empty thread");
  page.expose.current.submit({ messages: [{ type: "human", content: "Tell it slowly." }] });
  await until(() => texts().some((t) => t.length > 0 && process.env.SLOW_ANSWER.startsWith(t) && t !== ""
    && t !== "Tell it slowly."), "the first tokens");
  assert.ok(sessionStorage.getItem(`lg:stream:${threadId}`), "the hook kept the run to rejoin");
  page.root.unmount(); // the reload: the page goes, the run goes on
  document.getElementById("root").textContent = "";
  page = mount({ threadId, assistantId: "chat-direct", reconnectOnMount: true });
  await until(() => texts().includes(process.env.SLOW_ANSWER), "the whole answer after the reload");
  await until(() => !page.expose.current.isLoading, "the run's end");
  assert.deepEqual(texts().slice(-2), ["Tell it slowly.", process.env.SLOW_ANSWER]);
  page.root.unmount();
});

test("useStream regenerates an answer, switches branches and edits the first question, as agent-chat-ui does", async () => {
  const { expose, root } = mount({ threadId: process.env.REGEN_THREAD_ID, assistantId: "chat-direct",
    fetchStateHistory: true });
  const [question, answer] = [process.env.REGEN_QUESTION, process.env.REGEN_FIRST];
  await until(() => texts().includes(answer) && expose.current.getMessagesMetadata(expose.current.messages.at(-1))
    ?.firstSeenState, "the thread and its history");
  // Regenerate: no input, from the parent of the first state the answer is in.
  const shown = expose.current.getMessagesMetadata(expose.current.messages.at(-1));
  expose.current.submit(undefined, { checkpoint: shown.firstSeenState.parent_checkpoint, streamMode: ["values"],
    streamSubgraphs: true, streamResumable: true });
  await until(() => texts().includes(process.env.REGEN_AGAIN), "the answer made again");
  await until(() => !expose.current.isLoading, "the run's end");
  assert.deepEqual(texts(), [question, process.env.REGEN_AGAIN]);
  // The two answers are two branches of the same question: the switcher shows 2 and goes back.
  const again = await until(() => {
    const meta = expose.current.getMessagesMetadata(expose.current.messages.at(-1));
    return meta?.branchOptions?.length === 2 && meta;
  }, "the answer's two branches");
  expose.current.setBranch(again.branchOptions.find((b) => b !== again.branch));
  await until(() => texts().includes(answer), "the first answer's branch");
  assert.deepEqual(texts(), [question, answer]);
  // Edit the first question: a new input from the parent of the first state the question is in
  // (some versions of agent-chat-ui keep the edited message's id).
  const first = expose.current.messages[0];
  const asked = expose.current.getMessagesMetadata(first);
  expose.current.submit({ messages: [{ id: first.id, type: "human",
    content: [{ type: "text", text: process.env.EDITED_QUESTION }] }] },
    { checkpoint: asked.firstSeenState.parent_checkpoint, streamMode: ["values"], streamSubgraphs: true });
  await until(() => texts().includes(process.env.EDITED_ANSWER), "the edited question's answer");
  await until(() => !expose.current.isLoading, "the run's end");
  assert.deepEqual(texts(), [process.env.EDITED_QUESTION, process.env.EDITED_ANSWER]);
  root.unmount();
});
