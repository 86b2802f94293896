import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { modelConfigSchema } from "@ferry/protocol";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generatorConfigSchema } from "../apps/worker/src/generation/generator-config.js";
import {
  fixture,
  type GreedyCase,
  greedyCase,
  IdsByBytes,
  onnxGreedy,
  QWEN_TINY,
} from "./helpers/qwen-tiny.js";
import { Stack } from "./helpers/stack.js";

// A Llama/Qwen-shaped Optimum export (grouped-query attention, rotary positions, Qwen3's
// tokenizer and chat template) served by continuous batching must answer PyTorch's greedy
// tokens exactly. Two models of one repository: qwen-tiny as committed, and `my-qwen`, laid
// out from the same files by docs/model-repository.md's "Serve your Optimum export" steps.

const DOCS = "docs/model-repository.md";

/** The model.json the docs' step 3 shows. */
function documentedModelJson(): Record<string, unknown> {
  const text = readFileSync(DOCS, "utf8");
  const section = text.slice(text.indexOf("## Serve your Optimum export"));
  const block = /```json\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error(`${DOCS} has no model.json under "Serve your Optimum export"`);
  return JSON.parse(block) as Record<string, unknown>;
}

/** Step 3's list: model.json's architecture from an export's config.json. */
function architectureOf(hf: Record<string, number>) {
  return {
    n_layer: hf.num_hidden_layers,
    n_head: hf.num_attention_heads,
    n_kv_head: hf.num_key_value_heads,
    head_dim: hf.head_dim ?? (hf.hidden_size ?? 0) / (hf.num_attention_heads ?? 1),
    vocab_size: hf.vocab_size,
    context_length: hf.max_position_embeddings,
  };
}

/** Steps 2 and 3 on an export directory (qwen-tiny's files: its graph, config and tokenizer). */
function layOutExport(root: string, name: string, exported: string): void {
  mkdirSync(join(root, name, "1"), { recursive: true });
  cpSync(join(exported, "1", "model.onnx"), join(root, name, "1", "model.onnx"));
  for (const file of ["tokenizer.json", "tokenizer_config.json"])
    cpSync(join(exported, file), join(root, name, file));
  const hf = JSON.parse(readFileSync(join(exported, "config.json"), "utf8"));
  const documented = documentedModelJson();
  const architecture = architectureOf(hf);
  const config = {
    ...documented,
    name,
    architecture,
    outputs: [{ name: "logits", datatype: "FP32", dims: [-1, architecture.vocab_size] }],
  };
  writeFileSync(join(root, name, "model.json"), JSON.stringify(config, null, 2));
}

const repo = mkdtempSync(join(tmpdir(), "ferry-optimum-"));
cpSync(QWEN_TINY, join(repo, "qwen-tiny"), { recursive: true });
layOutExport(repo, "my-qwen", QWEN_TINY);

const stack = new Stack({ env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "qwen-tiny,my-qwen" } });
let openai: OpenAI;
const byBytes = new IdsByBytes();
beforeAll(async () => {
  await stack.start();
  openai = new OpenAI({ baseURL: stack.url("/v1"), apiKey: "unused", maxRetries: 0 });
});
afterAll(async () => {
  await stack.stop();
  rmSync(repo, { recursive: true, force: true });
});

/** What one request answered: its token ids (read back from their bytes), finish, usage. */
interface Answer {
  ids: number[];
  finish: string | null | undefined;
  promptTokens: number | undefined;
  cachedTokens: number | undefined;
}

const greedy = { temperature: 0 };

async function complete(c: GreedyCase, prompt: "ids" | "text", model = "qwen-tiny") {
  const res = await openai.completions.create({
    ...greedy,
    model,
    prompt: prompt === "ids" ? c.prompt_ids : (c.text ?? ""),
    max_tokens: c.max_tokens,
    logprobs: 0,
  });
  const choice = res.choices[0];
  return {
    ids: (choice?.logprobs?.tokens ?? []).map((t) => byBytes.idOfText(t)),
    finish: choice?.finish_reason,
    promptTokens: res.usage?.prompt_tokens,
    cachedTokens: cachedOf(res.usage),
  } satisfies Answer;
}

async function chat(c: GreedyCase, model = "qwen-tiny") {
  const res = await openai.chat.completions.create({
    ...greedy,
    model,
    messages: c.messages ?? [],
    max_tokens: c.max_tokens,
    logprobs: true,
    top_logprobs: 0,
  });
  const choice = res.choices[0];
  return {
    ids: (choice?.logprobs?.content ?? []).map((t) => byBytes.id(t.bytes ?? [])),
    finish: choice?.finish_reason,
    promptTokens: res.usage?.prompt_tokens,
    cachedTokens: cachedOf(res.usage),
  } satisfies Answer;
}

/** A streamed completion: resolves `started` at its first chunk, then its whole answer. */
function streamed(c: GreedyCase): { started: Promise<void>; answer: Promise<Answer> } {
  let start = () => {};
  const started = new Promise<void>((resolve) => {
    start = resolve;
  });
  const answer = (async () => {
    const stream = await openai.completions.create({
      ...greedy,
      model: "qwen-tiny",
      prompt: c.prompt_ids,
      max_tokens: c.max_tokens,
      logprobs: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    const ids: number[] = [];
    let finish: string | null | undefined;
    let promptTokens: number | undefined;
    for await (const chunk of stream) {
      start();
      const choice = chunk.choices[0];
      for (const t of choice?.logprobs?.tokens ?? []) ids.push(byBytes.idOfText(t));
      finish = choice?.finish_reason ?? finish;
      promptTokens = chunk.usage?.prompt_tokens ?? promptTokens;
    }
    start();
    return { ids, finish, promptTokens, cachedTokens: undefined };
  })();
  return { started, answer };
}

const cachedOf = (
  usage: { prompt_tokens_details?: { cached_tokens?: number } | null } | undefined,
) => usage?.prompt_tokens_details?.cached_tokens;

/** The answer PyTorch's reference gives: its ids, finish and prompt length. */
const expected = (c: GreedyCase) => ({
  name: c.name,
  ids: c.ids,
  finish: c.finish_reason,
  promptTokens: c.prompt_ids.length,
});
const got = (c: GreedyCase, a: Answer) => ({
  name: c.name,
  ids: a.ids,
  finish: a.finish,
  promptTokens: a.promptTokens,
});

describe("the fixture tells a right runtime from a wrong one", () => {
  it("the graph fed as Optimum lays it out decodes PyTorch's tokens; wrong positions or swapped KV heads do not", async () => {
    const c = greedyCase("turns");
    expect(await onnxGreedy(c.prompt_ids, c.max_tokens)).toEqual(c.ids);
    expect(await onnxGreedy(c.prompt_ids, c.max_tokens, "positions")).not.toEqual(c.ids);
    expect(await onnxGreedy(c.prompt_ids, c.max_tokens, "heads")).not.toEqual(c.ids);
  });
});

describe("a grouped-query, rotary decoder under continuous batching", () => {
  it("renders chats as Hugging Face documents Qwen3's template, into the reference's prompt ids", async () => {
    for (const c of fixture.prompts.filter((p) => p.kind === "chat")) {
      const res = await stack.post("/tokenize", { model: "qwen-tiny", messages: c.messages });
      expect(res.status).toBe(200);
      const { tokens } = (await res.json()) as { tokens: number[] };
      expect({ name: c.name, tokens }).toEqual({ name: c.name, tokens: c.prompt_ids });
    }
  });

  it("prompts of every length, joining while others decode, answer PyTorch's greedy tokens exactly", async () => {
    const plain = fixture.prompts.filter((p) => p.kind === "text");
    const chats = ["sky", "france", "turns"].map(greedyCase);
    // the longest streamed, the others beside it; as each of those ends, the same plain
    // prompt as text takes its seat (the API's tokenizer gives the reference's ids) while the
    // rest decode on
    const longest = plain.reduce((a, b) => (b.max_tokens > a.max_tokens ? b : a));
    const lead = streamed(longest);
    await lead.started;
    const joiners = [...plain];
    const second: Promise<Answer>[] = [];
    const first = [
      ...plain.filter((c) => c !== longest).map((c) => complete(c, "ids")),
      ...chats.map((c) => chat(c)),
    ].map((answer) =>
      answer.then((a) => {
        const next = joiners.shift();
        if (next) second.push(complete(next, "text"));
        return a;
      }),
    );
    const answers = [await lead.answer, ...(await Promise.all(first))];
    answers.push(...(await Promise.all(second)));
    const cases = [longest, ...plain.filter((c) => c !== longest), ...chats, ...plain];
    expect(cases.map((c, i) => got(c, answers[i] as Answer))).toEqual(cases.map(expected));
  });

  it("a prompt that begins as an earlier one reads that part from the prefix cache, and still answers the reference's tokens", async () => {
    const france = greedyCase("france");
    const japan = greedyCase("japan");
    await chat(france);
    const answer = await chat(japan);
    expect(got(japan, answer)).toEqual(expected(japan));
    let common = 0;
    while (france.prompt_ids[common] === japan.prompt_ids[common]) common++;
    // whole blocks of 16 tokens of the shared system turn
    expect(answer.cachedTokens).toBe(Math.floor(common / 16) * 16);
    expect(answer.cachedTokens).toBeGreaterThan(0);
  });
});

describe("docs/model-repository.md: serve your Optimum export", () => {
  it("the documented model.json is one the schemas take", () => {
    const documented = documentedModelJson();
    expect(() => modelConfigSchema.parse(documented)).not.toThrow();
    expect(() => generatorConfigSchema.parse(documented)).not.toThrow();
  });

  it("a model laid out by its steps is served, and answers as the reference", async () => {
    const ready = await fetch(stack.url("/v2/models/my-qwen/ready"));
    expect(ready.status).toBe(200);
    const sky = greedyCase("sky");
    const once = greedyCase("once");
    const [chatAnswer, textAnswer] = await Promise.all([
      chat(sky, "my-qwen"),
      complete(once, "text", "my-qwen"),
    ]);
    expect(got(sky, chatAnswer)).toEqual(expected(sky));
    expect(got(once, textAnswer)).toEqual(expected(once));
  });
});
