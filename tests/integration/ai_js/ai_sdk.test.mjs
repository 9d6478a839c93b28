// The Vercel AI SDK with Agentix as its OpenAI provider (`createOpenAI({baseURL})`): generateText
// and streamText with a local tool, on the provider's default model (the Responses API) and on
// its chat model (chat completions). The model calls the tool, the SDK runs it here, and the
// answer (second step) is the model's. The stack and the scripted answers are set up by
// tests/integration/test_openai_ai_sdk.py, in this file's order.
import assert from "node:assert/strict";
import { test } from "node:test";

import { createOpenAI } from "@ai-sdk/openai";
import { generateText, isStepCount, streamText, tool } from "ai";
import { z } from "zod";

const openai = createOpenAI({ baseURL: process.env.AI_URL, apiKey: process.env.AI_KEY });
const ran = [];
const tools = {
  get_weather: tool({
    description: "The weather in a city.",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      ran.push(city);
      return `3C in ${city}`;
    },
  }),
};
const models = { responses: (id) => openai(id), chat: (id) => openai.chat(id) };

for (const [api, model] of Object.entries(models)) {
  test(`generateText with a tool (${api})`, async () => {
    const before = ran.length;
    const result = await generateText({
      model: model("agentix-direct"), tools, stopWhen: isStepCount(3), prompt: "Weather in Oslo?",
    });
    assert.deepEqual(ran.slice(before), ["Oslo"]);
    assert.equal(result.steps[0].toolCalls[0].toolName, "get_weather");
    assert.equal(result.steps[0].finishReason, "tool-calls");
    assert.equal(result.text, process.env.ANSWER);
  });

  test(`streamText with a tool (${api})`, async () => {
    const before = ran.length;
    const result = streamText({
      model: model("agentix-react"), tools, stopWhen: isStepCount(3), prompt: "Weather in Rome?",
    });
    const pieces = [];
    for await (const piece of result.textStream) pieces.push(piece);
    assert.deepEqual(ran.slice(before), ["Rome"]);
    assert.equal(pieces.join(""), process.env.ANSWER);
    assert.equal((await result.steps)[0].toolCalls[0].input.city, "Rome");
  });
}
