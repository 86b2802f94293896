import { readFileSync } from "node:fs";
import { DEFAULT_PRIORITY, type JobEventBody, type SamplingParams } from "@ferry/protocol";
import { InferenceClient } from "@ferry/transport";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scrapeMetric } from "./helpers/metrics.js";
import { tempRepository } from "./helpers/model-repo.js";
import { busyNeighbours } from "./helpers/neighbours.js";
import { eachKey } from "./helpers/redis-keys.js";
import {
  referenceGreedy,
  referencePromptDistributions,
  referencePromptLogprobs,
  referenceSteps,
} from "./helpers/reference-lm.js";
import { readSse } from "./helpers/sse.js";
import { REDIS_URL, Stack, waitFor } from "./helpers/stack.js";
import { tokenCounts } from "./helpers/usage.js";

const stack = new Stack({ env: { WORKER_MODELS: "tiny-lm" } });
let openai: OpenAI;
beforeAll(async () => {
  await stack.start();
  openai = new OpenAI({ baseURL: stack.url("/v1"), apiKey: "not-needed", maxRetries: 0 });
});
afterAll(() => stack.stop());

const prompts = [
  "The meaning of life is",
  "Q: What is a computer?\nA:",
  "Once upon a time",
  "You will",
  "Never trust a",
  "The best way to",
  "A man walks into a bar",
  "Love is",
];

/** A non-streamed completion's answer, as much of it as these tests read. */
interface CompletionBody {
  choices: Array<{ text: string; finish_reason: string }>;
  usage: { completion_tokens: number };
}

/**
 * A completion sent straight through the transport, past the API's checks; `params` over
 * greedy defaults. Its result or error event.
 */
async function throughTransport(job: {
  prompt: string;
  prompt_ids?: number[];
  params: Record<string, unknown>;
}): Promise<JobEventBody | undefined> {
  const client = new InferenceClient({ redisUrl: REDIS_URL, prefix: stack.prefix });
  try {
    await client.ready();
    const greedy = { max_tokens: 4, temperature: 0, top_p: 1, top_k: 0, stop: [] };
    const { events, close } = await client.jobs.submitGenerateFollowing(
      {
        model: "tiny-lm",
        version: "1",
        ...job,
        params: { ...greedy, ignore_eos: false, ...job.params } as SamplingParams,
        deadline: Date.now() + 30_000,
      },
      { priority: DEFAULT_PRIORITY, maxQueueSize: 100, owner: "test" },
    );
    try {
      for await (const { body } of events)
        if (body.type === "result" || body.type === "error") return body;
    } finally {
      close();
    }
  } finally {
    await client.close();
  }
}

/** A request this file expects a 400 for: its error message. */
async function refusal(path: string, body: unknown): Promise<string> {
  const res = await stack.post(path, body);
  expect(res.status).toBe(400);
  return ((await res.json()) as { error: { message: string } }).error.message;
}

/** A guided completion's texts under seeds 1 to `seeds`: each must end on its own ("stop"). */
async function endedTexts(body: Record<string, unknown>, seeds: number): Promise<string[]> {
  return Promise.all(
    Array.from({ length: seeds }, async (_, k) => {
      const res = await openai.completions.create({
        ...body,
        seed: k + 1,
      } as OpenAI.CompletionCreateParamsNonStreaming);
      expect(res.choices[0]?.finish_reason).toBe("stop");
      return res.choices[0]?.text ?? "";
    }),
  );
}

/**
 * Log probabilities computed in two runs: equal to the rounding of differently shaped
 * batches (a request's neighbours and padding differ from run to run).
 */
function expectCloseAll(
  got: ReadonlyArray<number | null>,
  want: ReadonlyArray<number | null>,
): void {
  expect(got).toHaveLength(want.length);
  for (const [j, w] of want.entries())
    if (w === null) expect(got[j]).toBeNull();
    else expect(got[j]).toBeCloseTo(w, 3);
}

const workerMetric = (name: string) => scrapeMetric(stack.workers[0]?.metricsUrl ?? "", name);

describe("completions through the official openai client", () => {
  it("answers a completion with text, finish_reason and usage", async () => {
    const res = await openai.completions.create({
      model: "tiny-lm",
      prompt: "Hello",
      max_tokens: 8,
      temperature: 0,
    });
    expect(res.object).toBe("text_completion");
    expect(res.choices[0]?.finish_reason).toMatch(/^(stop|length)$/);
    expect(res.usage).toMatchObject({ prompt_tokens: 5 });
    expect(res.usage?.total_tokens).toBe(
      (res.usage?.prompt_tokens ?? 0) + (res.usage?.completion_tokens ?? 0),
    );
  });

  it("streams chunks whose text adds up to the same greedy completion, then usage", async () => {
    const whole = await openai.completions.create({
      model: "tiny-lm",
      prompt: prompts[0] ?? "",
      max_tokens: 24,
      temperature: 0,
    });
    const stream = await openai.completions.create({
      model: "tiny-lm",
      prompt: prompts[0] ?? "",
      max_tokens: 24,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let chunks = 0;
    let usage: unknown;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.text ?? "";
      chunks++;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(chunks).toBeGreaterThan(2);
    expect(text).toBe(whole.choices[0]?.text);
    expect(tokenCounts(usage)).toEqual(tokenCounts(whole.usage));
  });

  it("no two chunks share an event id: a result's finish and usage chunks carry it on the last alone", async () => {
    const res = await stack.post("/v1/completions", {
      model: "tiny-lm",
      prompt: prompts[1] ?? "",
      max_tokens: 6,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: Array<{ id: string | undefined; data: string }> = [];
    await readSse(res, (event) => {
      chunks.push({ id: event.id, data: event.data });
      return undefined;
    });
    const ids = chunks.map((c) => c.id).filter((id) => id !== undefined);
    expect(new Set(ids).size).toBe(ids.length);
    const usage = chunks.at(-2);
    expect(JSON.parse(usage?.data ?? "{}").usage).toBeTruthy();
    // the last event's id: a client that saw it has seen everything the job said
    expect(usage?.id).toBe(ids.at(-1));
    expect(chunks.at(-3)?.id).toBeUndefined();
    expect(chunks.at(-1)?.data).toBe("[DONE]");
  });

  it("vLLM's continuous_usage_stats: with include_usage, every chunk carries the usage so far", async () => {
    const prompt = prompts[1] ?? "";
    const stream = await openai.completions.create({
      model: "tiny-lm",
      prompt,
      max_tokens: 20,
      temperature: 0,
      logprobs: 1,
      stream: true,
      // vLLM's field, beside OpenAI's
      stream_options: { include_usage: true, continuous_usage_stats: true } as {
        include_usage: boolean;
      },
    });
    let sampled = 0;
    const seen: Array<OpenAI.CompletionUsage | undefined> = [];
    for await (const chunk of stream) {
      if (chunk.choices.length === 0) continue;
      sampled += chunk.choices[0]?.logprobs?.tokens?.length ?? 0;
      seen.push(chunk.usage);
      // each chunk counts the tokens sampled up to it, and the prompt's
      expect(chunk.usage).toEqual({
        prompt_tokens: Buffer.byteLength(prompt),
        completion_tokens: sampled,
        total_tokens: Buffer.byteLength(prompt) + sampled,
      });
    }
    expect(seen.length).toBeGreaterThan(2);
    expect(sampled).toBeGreaterThan(0);
    // without include_usage it asks for nothing (vLLM's rule)
    const plain = await openai.completions.create({
      model: "tiny-lm",
      prompt,
      max_tokens: 4,
      stream: true,
      stream_options: { continuous_usage_stats: true } as { include_usage?: boolean },
    });
    for await (const chunk of plain) expect(chunk.usage ?? undefined).toBeUndefined();
  });

  it("prefix caching: prompts that begin alike read only what differs, and answer as the reference decoder does", async () => {
    const preamble = `Q: ${"What did the fortune say? ".repeat(4)}\nA: It said `;
    const before = {
      queries: await workerMetric("ferry_worker_prefix_cache_queries_total"),
      hits: await workerMetric("ferry_worker_prefix_cache_hits_total"),
    };
    const endings = ["nothing.", "wait.", "go home."];
    // one after another: each later prompt finds the blocks the first one kept
    const texts: string[] = [];
    const cachedTokens: number[] = [];
    for (const ending of endings) {
      const res = await openai.completions.create({
        model: "tiny-lm",
        prompt: preamble + ending,
        max_tokens: 24,
        temperature: 0,
        logprobs: 2,
      });
      texts.push(res.choices[0]?.text ?? "");
      cachedTokens.push(res.usage?.prompt_tokens_details?.cached_tokens ?? -1);
      // the model's own scores, as the reference computes them from the whole prompt
      const steps = await referenceSteps(preamble + ending, 24);
      expectCloseAll(
        res.choices[0]?.logprobs?.token_logprobs ?? [],
        steps.map((step) => step.logprobs[step.token] ?? 0),
      );
    }
    expect(texts).toEqual(
      await Promise.all(endings.map((ending) => referenceGreedy(preamble + ending, 24))),
    );
    const shared = Math.floor(Buffer.byteLength(preamble) / 16) * 16;
    // usage says what came from the cache (OpenAI's field): nothing for the first, the
    // preamble's whole blocks for the later ones, whichever LM thread read them
    expect(cachedTokens).toEqual([0, shared, shared]);
    const queried = endings.reduce((n, e) => n + Buffer.byteLength(preamble + e), 0);
    expect((await workerMetric("ferry_worker_prefix_cache_queries_total")) - before.queries).toBe(
      queried,
    );
    // the second and third prompts each took (at least) the preamble's whole blocks
    expect(
      (await workerMetric("ferry_worker_prefix_cache_hits_total")) - before.hits,
    ).toBeGreaterThanOrEqual(2 * shared);
  });

  it("greedy output of 8 prompts sent at once equals unbatched in-process decoding, token for token", async () => {
    const [ferry, reference] = await Promise.all([
      Promise.all(
        prompts.map((prompt) =>
          openai.completions.create({ model: "tiny-lm", prompt, max_tokens: 32, temperature: 0 }),
        ),
      ),
      Promise.all(prompts.map((prompt) => referenceGreedy(prompt, 32))),
    ]);
    expect(ferry.map((r) => r.choices[0]?.text)).toEqual(reference);
  });

  it("several prompts in one request: a choice per prompt, in order, each its own greedy completion", async () => {
    const some = prompts.slice(0, 3);
    const [res, reference] = await Promise.all([
      openai.completions.create({ model: "tiny-lm", prompt: some, max_tokens: 20, temperature: 0 }),
      Promise.all(some.map((prompt) => referenceGreedy(prompt, 20))),
    ]);
    expect(res.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(res.choices.map((c) => c.text)).toEqual(reference);
    const promptTokens = some.reduce((n, p) => n + Buffer.byteLength(p), 0); // a byte-level LM
    expect(tokenCounts(res.usage)).toEqual({
      prompt_tokens: promptTokens,
      completion_tokens: 60,
      total_tokens: promptTokens + 60,
    });
  });

  it("several prompts streamed: chunks interleaved by index, each prompt's greedy text, then usage", async () => {
    const some = prompts.slice(3, 6);
    const reference = await Promise.all(some.map((prompt) => referenceGreedy(prompt, 24)));
    const { data: stream, response } = await openai.completions
      .create({
        model: "tiny-lm",
        prompt: some,
        max_tokens: 24,
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true },
      })
      .withResponse();
    const texts = some.map(() => "");
    const finishes: number[] = [];
    const ids = new Set<string>();
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      ids.add(chunk.id);
      usage = chunk.usage ?? usage;
      for (const choice of chunk.choices) {
        texts[choice.index] += choice.text;
        if (choice.finish_reason) finishes.push(choice.index);
      }
    }
    expect(texts).toEqual(reference);
    expect(finishes.sort()).toEqual([0, 1, 2]);
    expect(ids.size).toBe(1);
    expect(usage?.completion_tokens).toBe(72);
    expect(response.headers.get("x-job-id")?.split(", ")).toHaveLength(3);
  });

  it("several prompts: refused whole when one does not fit, and by name where one is taken", async () => {
    const tokens = await workerMetric("ferry_worker_generated_tokens_total");
    // the second cannot fit the context window (256 tokens): nothing is queued, the first
    // included (it would have made its 16 tokens well within the wait below)
    for (const stream of [false, true])
      expect(
        await refusal("/v1/completions", {
          model: "tiny-lm",
          prompt: ["ok", "x".repeat(300)],
          stream,
        }),
      ).toMatch(/maximum context length/);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(await workerMetric("ferry_worker_generated_tokens_total")).toBe(tokens);
    const two = { model: "tiny-lm", prompt: ["a", "b"], max_tokens: 4 };
    expect(await refusal("/v1/jobs", { model: "tiny-lm", input: two })).toMatch(/several prompts/);
  });

  it("prompts as token ids, one or a list, streamed or not: run as those ids, never as text", async () => {
    // ids no text encodes to: a byte that is not UTF-8 (0xff) and the end-of-text id (256)
    const ids = [[...Buffer.from("Once upon a"), 0xff, 256, 32], [...Buffer.from("Love is")]];
    const reference = await Promise.all(ids.map((prompt) => referenceGreedy(prompt, 16)));
    const greedy = { model: "tiny-lm", max_tokens: 16, temperature: 0 };
    const one = await openai.completions.create({ ...greedy, prompt: ids[0] ?? [] });
    expect(one.choices[0]?.text).toBe(reference[0]);
    expect(one.usage?.prompt_tokens).toBe(ids[0]?.length);
    const both = await openai.completions.create({ ...greedy, prompt: ids });
    expect(both.choices.map((c) => c.text)).toEqual(reference);
    const stream = await openai.completions.create({ ...greedy, prompt: ids, stream: true });
    const texts = ["", ""];
    for await (const chunk of stream)
      for (const choice of chunk.choices) texts[choice.index] += choice.text;
    expect(texts).toEqual(reference);
  });

  it("token ids: refused past the vocabulary or the context, and when empty", async () => {
    const refused = (body: Record<string, unknown>) =>
      refusal("/v1/completions", { model: "tiny-lm", ...body });
    expect(await refused({ prompt: [72, 257] })).toBe(
      "Token id 257 is out of vocabulary (this model has 257 tokens)",
    );
    expect(await refused({ prompt: [[72], [1, -1]] })).toBe(
      "prompt.1.1: not a token id (an integer from 0): -1",
    );
    expect(await refused({ prompt: [] })).toMatch(/^prompt/);
    expect(await refused({ prompt: Array(250).fill(65), max_tokens: 16 })).toMatch(
      /requested 266 tokens \(250 in the prompt, 16 for the completion\)/,
    );
    // a list past 262,144 ids is refused before any is read (3.9 million held the API's loop
    // 1.8 s, tried first as texts), truncated or not
    const many = Array(262_145).fill(65);
    for (const extra of [{}, { truncate_prompt_tokens: 8 }])
      expect(await refused({ prompt: many, ...extra })).toMatch(
        /^prompt: a list of at most 262144 elements; this one has 262145/,
      );
  });

  it("vLLM's rules: no empty stop string (it stopped at once, empty), stream_options only with a stream", async () => {
    const refused = (body: Record<string, unknown>) =>
      refusal("/v1/completions", { model: "tiny-lm", prompt: "Hi", max_tokens: 4, ...body });
    expect(await refused({ stop: "" })).toMatch(/stop cannot contain an empty string/);
    expect(await refused({ stop: ["x", ""] })).toMatch(/stop cannot contain an empty string/);
    expect(await refused({ stream_options: { include_usage: true } })).toMatch(
      /Stream options can only be defined when `stream=True`/,
    );
    // `{}`, as vLLM reads it, is no options
    const none = await stack.post("/v1/completions", {
      model: "tiny-lm",
      prompt: "Hi",
      max_tokens: 2,
      stream_options: {},
    });
    expect(none.status).toBe(200);
    const chat = await stack.post("/v1/chat/completions", {
      model: "tiny-lm",
      messages: [{ role: "user", content: "Hi" }],
      stream: false,
      stream_options: { include_usage: true },
    });
    expect(chat.status).toBe(400);
  });

  it("a worker refuses token ids past its vocabulary before they join a batch; its neighbours finish", async () => {
    // the API checks them first: these jobs come straight through the transport, as from an
    // API that does not (an older one, or another client of the queue); sent together, so
    // that they may share a pass
    const ids = prompts.slice(0, 6).map((prompt) => [...Buffer.from(prompt)]);
    ids.splice(3, 0, [72, 300]);
    const ends = await Promise.all(
      ids.map((prompt_ids) =>
        throughTransport({ prompt: "", prompt_ids, params: { max_tokens: 16, ignore_eos: true } }),
      ),
    );
    const [badEnd] = ends.splice(3, 1);
    expect(badEnd).toEqual({
      type: "error",
      error: { code: "INVALID_INPUT", message: "Token id 300 is out of vocabulary" },
    });
    for (const one of ends)
      expect(one).toMatchObject({
        type: "result",
        result: { finish_reason: "length", usage: { completion_tokens: 16 } },
      });
  });

  it("a worker refuses sampling fields it does not know (an API newer than it) rather than ignore them", async () => {
    expect(await throughTransport({ prompt: "Hi", params: { typical_p: 0.5 } })).toEqual({
      type: "error",
      error: {
        code: "INVALID_INPUT",
        message:
          "This worker does not know the sampling field(s) typical_p: is the API newer than its workers?",
      },
    });
  });

  it("n choices of each prompt, prompt by prompt: the j-th draws with seed + j, usage counts each prompt once", async () => {
    const some = prompts.slice(0, 2);
    const sampled = { model: "tiny-lm", max_tokens: 16, temperature: 1 };
    const res = await openai.completions.create({ ...sampled, prompt: some, n: 3, seed: 40 });
    // each choice is what its own prompt and seed give alone
    const alone = await Promise.all(
      some.flatMap((prompt) =>
        [0, 1, 2].map((j) => openai.completions.create({ ...sampled, prompt, seed: 40 + j })),
      ),
    );
    expect(res.choices.map((c) => c.index)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(res.choices.map((c) => c.text)).toEqual(alone.map((one) => one.choices[0]?.text));
    // sampled with three seeds, a prompt's choices are not one text thrice
    expect(new Set(res.choices.slice(0, 3).map((c) => c.text)).size).toBeGreaterThan(1);
    const promptTokens = some.reduce((n, p) => n + Buffer.byteLength(p), 0);
    const completionTokens = alone.reduce((n, one) => n + (one.usage?.completion_tokens ?? 0), 0);
    expect(tokenCounts(res.usage)).toEqual({
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
    });
    // streamed: the same choices, interleaved by index, each finished once, usage the same
    const stream = await openai.completions.create({
      ...sampled,
      prompt: some,
      n: 3,
      seed: 40,
      stream: true,
      stream_options: { include_usage: true },
    });
    const texts = res.choices.map(() => "");
    const finishes: number[] = [];
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      usage = chunk.usage ?? usage;
      for (const choice of chunk.choices) {
        texts[choice.index] += choice.text;
        if (choice.finish_reason) finishes.push(choice.index);
      }
    }
    expect(texts).toEqual(res.choices.map((c) => c.text));
    expect(finishes.sort()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(tokenCounts(usage)).toEqual(tokenCounts(res.usage));
  });

  it("n: refused past 64 choices in all, and by an async job", async () => {
    const tokens = await workerMetric("ferry_worker_generated_tokens_total");
    expect(await refusal("/v1/completions", { model: "tiny-lm", prompt: "a", n: 65 })).toMatch(
      /^n: /,
    );
    for (const stream of [false, true])
      expect(
        await refusal("/v1/completions", { model: "tiny-lm", prompt: ["a", "b"], n: 33, stream }),
      ).toMatch(/at most 64 choices \(prompts times n\); this one asks for 2 x 33/);
    const two = { model: "tiny-lm", prompt: "a", n: 2, max_tokens: 4 };
    expect(await refusal("/v1/jobs", { model: "tiny-lm", input: two })).toMatch(/n > 1/);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await workerMetric("ferry_worker_generated_tokens_total")).toBe(tokens);
  });

  it("constraints that together leave no token are a 400 saying so, not an empty or invalid 'stop'", async () => {
    // (before: "" with finish_reason "stop", a text none of the choices, no JSON for a schema)
    for (const constraints of [
      { guided_choice: ["abc"], bad_words: ["abc", "b"] },
      { guided_regex: "[0-9]{3}", allowed_token_ids: [65] },
      { allowed_token_ids: [256], min_tokens: 5 },
    ])
      expect(
        await refusal("/v1/completions", {
          model: "tiny-lm",
          prompt: "a",
          max_tokens: 20,
          ...constraints,
        }),
        JSON.stringify(constraints),
      ).toMatch(/no token can follow \d+ generated: allowed_token_ids, bad_words, min_tokens/);
  });

  it("64 choices, streamed or not, answer without a listener warning on the API's terminal", async () => {
    for (const stream of [false, true]) {
      const res = await stack.post("/v1/completions", {
        model: "tiny-lm",
        prompt: "Once",
        max_tokens: 2,
        n: 64,
        stream,
      });
      expect(res.status).toBe(200);
      await res.text();
    }
    // a listener a choice on the request's signal: Node warned of a leak past 10 (a user's
    // terminal showed it for any n of 11 or more)
    expect(stack.api.output.join("")).not.toMatch(/MaxListenersExceededWarning/);
  });

  it("logit_bias and the frequency, presence and repetition penalties: greedy, token for token as documented", async () => {
    const prompt = prompts[4] ?? "";
    const greedy = { model: "tiny-lm", prompt, max_tokens: 40, temperature: 0 };
    const plain = (await openai.completions.create(greedy)).choices[0]?.text ?? "";
    const cases = [
      { frequency_penalty: 1.5, presence_penalty: 0.5 },
      { presence_penalty: -1 },
      { repetition_penalty: 1.4 },
      // 'e' and ' ' never; then everything at once
      { logit_bias: { "101": -100, "32": -100 } },
      { logit_bias: { "101": -5 }, frequency_penalty: 0.7, repetition_penalty: 1.2 },
    ];
    for (const penalties of cases) {
      const [ferry, reference] = await Promise.all([
        // penalty fields beyond OpenAI's typed ones go as they are (vLLM's too)
        openai.completions.create({ ...greedy, ...penalties } as typeof greedy),
        referenceGreedy(prompt, 40, penalties),
      ]);
      expect(ferry.choices[0]?.text, JSON.stringify(penalties)).toBe(reference);
      // each changes what greedy decoding picks: ignoring it could not pass
      expect(reference, JSON.stringify(penalties)).not.toBe(plain);
    }
    const [banned] = (await openai.completions.create({ ...greedy, ...cases[3] })).choices;
    expect(banned?.text).not.toMatch(/[e ]/);
    const forced = await openai.completions.create({ ...greedy, logit_bias: { "120": 100 } });
    expect(forced.choices[0]?.text).toBe("x".repeat(40));
  });

  it("min_p 1 keeps the likeliest token alone: sampled hot, it decodes as greedy does", async () => {
    const prompt = prompts[6] ?? "";
    const reference = await referenceGreedy(prompt, 30);
    for (const seed of [1, 2, 3]) {
      const hot = { model: "tiny-lm", prompt, max_tokens: 30, temperature: 2, seed };
      const res = await openai.completions.create({ ...hot, min_p: 1 } as typeof hot);
      expect(res.choices[0]?.text).toBe(reference);
      // without it, the same draws wander off
      expect((await openai.completions.create(hot)).choices[0]?.text).not.toBe(reference);
    }
  });

  it("stop_token_ids end the completion on that token, which stays in it (vLLM's rule for a token that is not special)", async () => {
    const prompt = prompts[1] ?? "";
    const reference = await referenceGreedy(prompt, 40);
    const stopAt = reference.charCodeAt(6);
    const expected = reference.slice(0, reference.indexOf(String.fromCharCode(stopAt)) + 1);
    const greedy = { model: "tiny-lm", prompt, max_tokens: 40, temperature: 0 };
    const res = await openai.completions.create({
      ...greedy,
      stop_token_ids: [stopAt, 255],
    } as typeof greedy);
    expect(res.choices[0]).toMatchObject({ text: expected, finish_reason: "stop" });
    expect(res.usage?.completion_tokens).toBe(Buffer.byteLength(expected));
  });

  it("include_stop_str_in_output: the text ends after the stop string, streamed or not (vLLM's)", async () => {
    const prompt = prompts[1] ?? "";
    const reference = await referenceGreedy(prompt, 40);
    const stop = reference.slice(6, 9);
    const cut = reference.indexOf(stop);
    const greedy = { model: "tiny-lm", prompt, max_tokens: 40, temperature: 0, stop: [stop] };
    const res = await openai.completions.create({
      ...greedy,
      include_stop_str_in_output: true,
    } as typeof greedy);
    expect(res.choices[0]).toMatchObject({
      text: reference.slice(0, cut + stop.length),
      finish_reason: "stop",
    });
    const stream = await openai.completions.create({
      ...greedy,
      include_stop_str_in_output: true,
      stream: true,
    } as typeof greedy & { stream: true });
    let streamed = "";
    for await (const chunk of stream) streamed += chunk.choices[0]?.text ?? "";
    expect(streamed).toBe(reference.slice(0, cut + stop.length));
    // without it, OpenAI's rule: the stop string is not sent
    const plain = await openai.completions.create(greedy);
    expect(plain.choices[0]?.text).toBe(reference.slice(0, cut));
  });

  it("allowed_token_ids: only those tokens are drawn, greedy token for token as masking the rest", async () => {
    const prompt = prompts[0] ?? "";
    const allowed = [...Buffer.from("aeiou nst")];
    // the reference masks the rest with a bias no logit survives
    const mask = Object.fromEntries(
      Array.from({ length: 257 }, (_, id) => id)
        .filter((id) => !allowed.includes(id))
        .map((id) => [String(id), -1e9]),
    );
    const [expected, unmasked] = await Promise.all([
      referenceGreedy(prompt, 24, { logit_bias: mask }),
      referenceGreedy(prompt, 24),
    ]);
    expect(expected).not.toBe(unmasked);
    const greedy = { model: "tiny-lm", prompt, max_tokens: 24, temperature: 0 };
    const res = await openai.completions.create({
      ...greedy,
      allowed_token_ids: allowed,
    } as typeof greedy);
    expect(res.choices[0]?.text).toBe(expected);
    // sampled hot: still only those
    const hot = await openai.completions.create({
      ...greedy,
      temperature: 2,
      seed: 7,
      max_tokens: 64,
      allowed_token_ids: allowed,
    } as typeof greedy);
    expect([...Buffer.from(hot.choices[0]?.text ?? "")].every((b) => allowed.includes(b))).toBe(
      true,
    );
    expect(await refusal("/v1/completions", { ...greedy, allowed_token_ids: [1, 300] })).toBe(
      "allowed_token_ids: token id 300 is out of vocabulary (this model has 257 tokens)",
    );
    expect(await refusal("/v1/completions", { ...greedy, allowed_token_ids: [] })).toMatch(
      /^allowed_token_ids: /,
    );
  });

  it("bad_words: a barred word is never completed, greedy token for token as vLLM bars it", async () => {
    const prompt = prompts[4] ?? "";
    const plain = await referenceGreedy(prompt, 40);
    const word = plain.slice(4, 7);
    const barred = [...Buffer.from(word)];
    const expected = await referenceGreedy(prompt, 40, { bad_words: [barred] });
    expect(plain).toContain(word);
    expect(expected).not.toContain(word);
    const greedy = { model: "tiny-lm", prompt, max_tokens: 40, temperature: 0 };
    const res = await openai.completions.create({ ...greedy, bad_words: [word] } as typeof greedy);
    expect(res.choices[0]?.text).toBe(expected);
    // a one-token word: never drawn at all
    const letter = plain.trim()[0] ?? "e";
    const none = await openai.completions.create({
      ...greedy,
      temperature: 1.5,
      seed: 3,
      bad_words: [letter],
    } as typeof greedy);
    expect(none.choices[0]?.text).not.toContain(letter);
  });

  it("guided_choice: the answer is exactly one of the choices, sampled or greedy, chat or completion (vLLM's)", async () => {
    const choices = ["yes", "no", "maybe not", "maybe so"];
    const base = { model: "tiny-lm", prompt: "Q: Is it raining?\nA:", max_tokens: 20 };
    const texts = await endedTexts({ ...base, temperature: 2, guided_choice: choices }, 8);
    for (const text of texts) expect(choices).toContain(text);
    expect(new Set(texts).size).toBeGreaterThan(1);
    // vLLM's newer form, and a chat, streamed
    const stream = await openai.chat.completions.create({
      model: "tiny-lm",
      messages: [{ role: "user", content: "Rain?" }],
      temperature: 0,
      stream: true,
      structured_outputs: { choice: choices },
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    let streamed = "";
    for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? "";
    expect(choices).toContain(streamed);
    // unconstrained, greedy says something else
    const free = await openai.completions.create({ ...base, temperature: 0 });
    expect(choices).not.toContain(free.choices[0]?.text);
    // vLLM's JSON mode on a completion: it opens an object at once
    const json = await openai.completions.create({
      ...base,
      temperature: 0,
      structured_outputs: { json_object: true },
    } as typeof base);
    expect(json.choices[0]?.text).toMatch(/^\s*\{/);
    expect(free.choices[0]?.text).not.toMatch(/^\s*\{/);
    const refused = (extra: Record<string, unknown>) =>
      refusal("/v1/completions", { ...base, ...extra });
    expect(await refused({ guided_choice: ["a"], response_format: { type: "json_object" } })).toBe(
      "give one of guided_choice, json_object, not several",
    );
    expect(await refused({ structured_outputs: { lark: "start: x" } })).toBe(
      "structured_outputs: structured_outputs.lark is not supported by this server (of its kinds, choice, regex, json, json_object and grammar are)",
    );
    expect(await refused({ guided_choice: ["a"], ignore_eos: true })).toMatch(
      /cannot be combined with ignore_eos or min_tokens/,
    );
    expect(await refused({ guided_choice: [] })).toMatch(/^guided_choice: /);
  });

  it("guided_regex: the answer matches the pattern whole, sampled or greedy (vLLM's); what the matcher lacks is a 400", async () => {
    const pattern = "\\d{3}-[a-z]{2,6} (yes|no|é+)\\.";
    const whole = new RegExp(`^(?:${pattern})$`, "u");
    const base = { model: "tiny-lm", prompt: "Order number:", max_tokens: 30 };
    const texts = await endedTexts({ ...base, temperature: 1.5, guided_regex: pattern }, 6);
    for (const text of texts) expect(text).toMatch(whole);
    expect(new Set(texts).size).toBeGreaterThan(1);
    const greedy = await openai.completions.create({
      ...base,
      temperature: 0,
      structured_outputs: { regex: pattern },
    } as typeof base);
    expect(greedy.choices[0]?.text).toMatch(whole);
    expect(await refusal("/v1/completions", { ...base, guided_regex: "(" })).toBe(
      "guided_regex: not a valid regular expression",
    );
    expect(await refusal("/v1/completions", { ...base, guided_regex: "(?=a)a" })).toBe(
      "guided_regex: lookaround ((?=, (?!, (?<=, (?<!) is not supported",
    );
    // counted repetitions are written out: a pattern whose expansion is past the budget is a 400
    expect(
      await refusal("/v1/completions", { ...base, guided_regex: "(?:(?:a{100}){100}){100}" }),
    ).toMatch(/^guided_regex: the pattern writes out to 1000000 characters .* more than 100000$/);
  });

  it("guided_grammar: the answer is a text of the EBNF grammar (vLLM's, XGrammar's dialect); a grammar that does not parse is a 400", async () => {
    const grammar = 'root ::= ("red" | "green" | "blue") " " [0-9] [0-9]?';
    const whole = /^(red|green|blue) [0-9][0-9]?$/;
    const base = { model: "tiny-lm", prompt: "Colour:", max_tokens: 20 };
    const texts = await endedTexts({ ...base, temperature: 1.5, guided_grammar: grammar }, 6);
    for (const text of texts) expect(text).toMatch(whole);
    const greedy = await openai.completions.create({
      ...base,
      temperature: 0,
      structured_outputs: { grammar },
    } as typeof base);
    expect(greedy.choices[0]?.text).toMatch(whole);
    expect(await refusal("/v1/completions", { ...base, guided_grammar: 'root ::= "a" |' })).toMatch(
      /^grammar: EBNF parser error at line 1/,
    );
  });

  it("truncate_prompt_tokens: the prompt's last tokens are read, as vLLM reads them; a prompt past the window then fits", async () => {
    const prompt = prompts[6] ?? "";
    const tail = [...Buffer.from(prompt)].slice(-8);
    const [expected, whole] = await Promise.all([
      referenceGreedy(tail, 20),
      referenceGreedy(prompt, 20),
    ]);
    expect(expected).not.toBe(whole);
    const greedy = { model: "tiny-lm", prompt, max_tokens: 20, temperature: 0 };
    const res = await openai.completions.create({
      ...greedy,
      truncate_prompt_tokens: 8,
    } as typeof greedy);
    expect(res.choices[0]?.text).toBe(expected);
    expect(res.usage?.prompt_tokens).toBe(8);
    // an echo is the text the model read
    const echoed = await openai.completions.create({
      ...greedy,
      echo: true,
      truncate_prompt_tokens: 8,
    } as typeof greedy);
    expect(echoed.choices[0]?.text).toBe(Buffer.from(tail).toString() + expected);
    const long = { ...greedy, prompt: "x".repeat(400) + prompt };
    expect(await refusal("/v1/completions", long)).toMatch(/maximum context length is 256 tokens/);
    const fits = await openai.completions.create({
      ...long,
      truncate_prompt_tokens: 100,
    } as typeof greedy);
    expect(fits.usage?.prompt_tokens).toBe(100);
    expect(await refusal("/v1/completions", { ...long, truncate_prompt_tokens: 300 })).toBe(
      "truncate_prompt_tokens value (300) is greater than max_model_len (256). Please, select a smaller truncation size.",
    );
    // truncated, a prompt is still tokenized whole: past 64 characters a token of the window
    // it is refused before that, as any prompt is
    const huge = { ...greedy, prompt: "x".repeat(256 * 64 + 1), truncate_prompt_tokens: 8 };
    expect(await refusal("/v1/completions", huge)).toMatch(
      /maximum context length is 256 tokens; the prompt has 16385 characters/,
    );
  });

  it("logprobs: each token's log probability under the model and its likeliest alternatives, streamed or not", async () => {
    const prompt = prompts[2] ?? "";
    const steps = await referenceSteps(prompt, 24);
    const greedy = { model: "tiny-lm", prompt, max_tokens: 24, temperature: 0, logprobs: 3 };
    const res = await openai.completions.create(greedy);
    const lp = res.choices[0]?.logprobs;
    expect(lp?.tokens?.join("")).toBe(res.choices[0]?.text);
    expect(lp?.tokens).toEqual(steps.map((step) => String.fromCharCode(step.token)));
    for (const [i, step] of steps.entries()) {
      // the reference's own log-softmax, to the rounding of a batched run
      expect(lp?.token_logprobs?.[i]).toBeCloseTo(step.logprobs[step.token] ?? 0, 3);
      const top = [...step.logprobs.keys()]
        .sort((a, b) => (step.logprobs[b] ?? 0) - (step.logprobs[a] ?? 0))
        .slice(0, 3);
      // greedy's pick is the likeliest, so the three alternatives hold it
      expect(Object.keys(lp?.top_logprobs?.[i] ?? {})).toEqual(
        top.map((id) => String.fromCharCode(id)),
      );
    }
    expect(lp?.text_offset).toEqual(steps.map((_, i) => i));
    // streamed, the same tokens arrive chunk by chunk, their offsets running on
    const stream = await openai.completions.create({ ...greedy, stream: true });
    const streamed = { tokens: [] as string[], offsets: [] as number[], logprobs: [] as number[] };
    for await (const chunk of stream) {
      const one = chunk.choices[0]?.logprobs;
      streamed.tokens.push(...(one?.tokens ?? []));
      streamed.offsets.push(...(one?.text_offset ?? []));
      streamed.logprobs.push(...(one?.token_logprobs ?? []));
    }
    expect(streamed.tokens).toEqual(lp?.tokens);
    expect(streamed.offsets).toEqual(lp?.text_offset);
    expectCloseAll(streamed.logprobs, lp?.token_logprobs ?? []);
    // without logprobs, none
    const plain = await openai.completions.create({ ...greedy, logprobs: null });
    expect(plain.choices[0]?.logprobs).toBeNull();
  });

  it("echo: the text begins with the prompt's, streamed or not, an async job's too", async () => {
    const prompt = prompts[3] ?? "";
    const reference = await referenceGreedy(prompt, 12);
    const greedy = { model: "tiny-lm", prompt, max_tokens: 12, temperature: 0, echo: true };
    const res = await openai.completions.create(greedy);
    expect(res.choices[0]?.text).toBe(prompt + reference);
    expect(res.usage?.completion_tokens).toBe(Buffer.byteLength(reference));
    const stream = await openai.completions.create({ ...greedy, stream: true });
    const chunks: string[] = [];
    for await (const chunk of stream) chunks.push(chunk.choices[0]?.text ?? "");
    expect(chunks[0]?.startsWith(prompt)).toBe(true);
    expect(chunks.join("")).toBe(prompt + reference);
    const submitted = await stack.post("/v1/jobs", { model: "tiny-lm", input: greedy });
    const { id } = (await submitted.json()) as { id: string };
    let job: { status: string; result?: { choices: Array<{ text: string }> } } | undefined;
    await waitFor(async () => {
      job = (await (await fetch(stack.url(`/v1/jobs/${id}`))).json()) as typeof job;
      return job?.status === "succeeded";
    }, 10_000);
    expect(job?.result?.choices[0]?.text).toBe(prompt + reference);
  });

  it("echo with logprobs scores the prompt as lm-evaluation-harness asks: token ids, one more token, the first prompt token's null", async () => {
    // what its local-completions model sends for a loglikelihood request
    const context = [...Buffer.from("Once upon a time, there")];
    const continuation = [...Buffer.from(" was")];
    const ids = [...context, ...continuation];
    const body = { model: "tiny-lm", prompt: ids, max_tokens: 1, temperature: 0, logprobs: 1 };
    const [res, expected] = await Promise.all([
      openai.completions.create({ ...body, echo: true }),
      referencePromptLogprobs(ids),
    ]);
    const lp = res.choices[0]?.logprobs;
    expect(lp?.tokens?.slice(0, ids.length)).toEqual(ids.map((b) => String.fromCharCode(b)));
    expect(lp?.token_logprobs).toHaveLength(ids.length + 1);
    expect(lp?.token_logprobs?.[0]).toBeNull();
    expect(lp?.top_logprobs?.[0]).toBeNull();
    for (const [j, logprob] of expected.entries())
      expect(lp?.token_logprobs?.[j + 1]).toBeCloseTo(logprob, 3);
    // the harness's greedy check reads top_logprobs: the likeliest key at each place
    for (const top of lp?.top_logprobs?.slice(1) ?? [])
      expect(Object.keys(top ?? {}).length).toBeGreaterThanOrEqual(1);
    expect(lp?.text_offset?.slice(0, 4)).toEqual([0, 1, 2, 3]);
    // streamed: the same, the prompt's in the first chunk
    const stream = await openai.completions.create({ ...body, echo: true, stream: true });
    const streamed: Array<number | null> = [];
    for await (const chunk of stream)
      streamed.push(...(chunk.choices[0]?.logprobs?.token_logprobs ?? []));
    expectCloseAll(streamed, lp?.token_logprobs ?? []);
    // without echo, only the completion's
    const plain = await openai.completions.create(body);
    expect(plain.choices[0]?.logprobs?.token_logprobs).toHaveLength(1);
    // the harness batches its requests: a list of id lists, a choice each, in order
    const batch = await openai.completions.create({ ...body, prompt: [context, ids], echo: true });
    expect(batch.choices.map((c) => c.logprobs?.token_logprobs?.length)).toEqual([
      context.length + 1,
      ids.length + 1,
    ]);
    expectCloseAll(batch.choices[1]?.logprobs?.token_logprobs ?? [], lp?.token_logprobs ?? []);
  });

  it("vLLM's prompt_logprobs: every prompt token's log probability, rank and likeliest alternatives, by token id", async () => {
    const prompt = "Once upon a time";
    const ids = [...Buffer.from(prompt)];
    const dists = await referencePromptDistributions(prompt);
    type Entry = Record<string, { logprob: number; rank: number; decoded_token: string }> | null;
    const res = await stack.post("/v1/completions", {
      model: "tiny-lm",
      prompt,
      max_tokens: 2,
      temperature: 0,
      prompt_logprobs: 3,
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      choices: Array<{ text: string; logprobs: unknown; prompt_logprobs: Entry[] }>;
    };
    const choice = body.choices[0];
    // no echo: the text and the (absent) logprobs are the completion's alone
    expect(choice?.logprobs).toBeNull();
    expect(choice?.text).toBe(await referenceGreedy(prompt, 2));
    const got = choice?.prompt_logprobs ?? [];
    expect(got).toHaveLength(ids.length);
    expect(got[0]).toBeNull();
    for (const [j, dist] of dists.entries()) {
      const entry = got[j + 1] ?? {};
      const id = ids[j + 1] ?? 0;
      const own = dist[id] ?? 0;
      const above = (v: number) => [...dist].filter((x) => x > v).length;
      expect(entry[String(id)]?.logprob).toBeCloseTo(own, 3);
      expect(entry[String(id)]?.decoded_token).toBe(String.fromCharCode(id));
      // its rank, to a batch's rounding (a near-tie may fall either way)
      expect(entry[String(id)]?.rank).toBeGreaterThanOrEqual(above(own + 1e-4) + 1);
      expect(entry[String(id)]?.rank).toBeLessThanOrEqual(above(own - 1e-4) + 1);
      // the 3 likeliest, ranked 1 to 3, and the prompt's token among them or beside them
      const third = [...dist].sort((a, b) => b - a)[2] ?? 0;
      const alternatives = Object.entries(entry).filter(([key]) => key !== String(id));
      // (a near-tie with the third may fall either way)
      const count = Object.keys(entry).length;
      if (own > third + 1e-4) expect(count).toBe(3);
      if (own < third - 1e-4) expect(count).toBe(4);
      for (const [key, alt] of alternatives) {
        expect(alt.logprob).toBeCloseTo(dist[Number(key)] ?? 0, 3);
        expect(alt.logprob).toBeGreaterThanOrEqual(third - 1e-3);
        expect([1, 2, 3]).toContain(alt.rank);
      }
    }
    // with an echo's logprobs in the same request: each keeps its own count of alternatives
    const both = await openai.completions.create({
      model: "tiny-lm",
      prompt,
      max_tokens: 1,
      temperature: 0,
      echo: true,
      logprobs: 1,
      // @ts-expect-error vLLM's field, not in the openai client's types: sent as it is
      prompt_logprobs: 3,
    });
    const echoed = both.choices[0]?.logprobs?.top_logprobs ?? [];
    expect(echoed).toHaveLength(ids.length + 1);
    for (const top of echoed.slice(1)) expect(Object.keys(top ?? {}).length).toBeLessThanOrEqual(2);
    const vllm = (both.choices[0] as unknown as { prompt_logprobs: Entry[] }).prompt_logprobs;
    expect(vllm.slice(1).every((e) => Object.keys(e ?? {}).length >= 3)).toBe(true);
    expectCloseAll(
      vllm.slice(1).map((e, j) => e?.[String(ids[j + 1])]?.logprob ?? null),
      got.slice(1).map((e, j) => e?.[String(ids[j + 1])]?.logprob ?? null),
    );
  });

  it("prompt_logprobs: a chat's are its rendered prompt's, an async job's result has them, a stream refuses alternatives (vLLM's rules)", async () => {
    const chat = await stack.post("/v1/chat/completions", {
      model: "tiny-lm",
      messages: [{ role: "user", content: "Hello there" }],
      max_tokens: 1,
      prompt_logprobs: 0,
    });
    expect(chat.status).toBe(200);
    const chatBody = (await chat.json()) as {
      prompt_logprobs: Array<Record<string, { rank: number }> | null>;
      usage: { prompt_tokens: number };
    };
    expect(chatBody.prompt_logprobs).toHaveLength(chatBody.usage.prompt_tokens);
    expect(chatBody.prompt_logprobs[0]).toBeNull();
    // 0 alternatives: the prompt's own token alone
    for (const e of chatBody.prompt_logprobs.slice(1)) expect(Object.keys(e ?? {})).toHaveLength(1);
    const submitted = await stack.post("/v1/jobs", {
      model: "tiny-lm",
      input: { model: "tiny-lm", prompt: "Love is", max_tokens: 1, prompt_logprobs: 1 },
    });
    const { id } = (await submitted.json()) as { id: string };
    let job:
      | { status: string; result?: { choices: Array<{ prompt_logprobs?: unknown[] }> } }
      | undefined;
    await waitFor(async () => {
      job = (await (await fetch(stack.url(`/v1/jobs/${id}`))).json()) as typeof job;
      return job?.status === "succeeded";
    }, 10_000);
    expect(job?.result?.choices[0]?.prompt_logprobs).toHaveLength(7);
    // the result is read from the job's log: BullMQ keeps no copy of it, in the job nor in the
    // queue's events stream (which has no TTL, only a length)
    const copies: string[] = [];
    await eachKey(stack.prefix, "*tiny-lm*", async (node, key) => {
      const type = await node.type(key);
      if (type === "stream" && key.endsWith(":events"))
        copies.push(JSON.stringify(await node.xrange(key, "-", "+")));
      if (type === "hash" && key.endsWith(`:${id}`))
        copies.push(String(await node.hget(key, "returnvalue")));
    });
    expect(copies.length).toBeGreaterThanOrEqual(2);
    for (const copy of copies) expect(copy).not.toContain("prompt_logprobs");
    const streamed = { model: "tiny-lm", prompt: "a b", max_tokens: 1, stream: true };
    expect(await refusal("/v1/completions", { ...streamed, prompt_logprobs: 2 })).toBe(
      "`prompt_logprobs` are not available when `stream=True`",
    );
    expect(
      await refusal("/v1/completions", { prompt: "a", model: "tiny-lm", prompt_logprobs: 21 }),
    ).toMatch(/^prompt_logprobs: /);
    // 0 in a stream is accepted and carries nothing (vLLM's)
    const zero = await stack.post("/v1/completions", { ...streamed, prompt_logprobs: 0 });
    expect(zero.status).toBe(200);
    expect(await zero.text()).not.toContain("prompt_logprobs");
  });

  it("logprobs are the model's own, before bias and penalties pick another token", async () => {
    const prompt = prompts[2] ?? "";
    const steps = await referenceSteps(prompt, 6, { logit_bias: { "120": 100 } });
    const res = await openai.completions.create({
      model: "tiny-lm",
      prompt,
      max_tokens: 6,
      temperature: 0,
      logprobs: 0,
      logit_bias: { "120": 100 },
    });
    expect(res.choices[0]?.text).toBe("xxxxxx");
    const reported = res.choices[0]?.logprobs?.token_logprobs ?? [];
    expect(reported).toHaveLength(6);
    for (const [i, step] of steps.entries()) {
      expect(reported[i]).toBeCloseTo(step.logprobs[120] ?? 0, 3);
      // a token the model itself finds unlikely: far from the biased certainty
      expect(reported[i]).toBeLessThan(-1);
    }
  });

  it("min_tokens: no end of text before them, and no stop string that ends before them (vLLM's rule)", async () => {
    const greedy = { model: "tiny-lm", max_tokens: 80, temperature: 0 };
    // this prompt's greedy answer ends with the end-of-text token after 53 tokens
    const ask = { ...greedy, prompt: "Why is the sky blue?" };
    const early = (await openai.completions.create(ask)).choices[0];
    expect(early?.finish_reason).toBe("stop");
    const longer = await openai.completions.create({ ...ask, min_tokens: 60 } as typeof ask);
    expect(longer.usage?.completion_tokens).toBeGreaterThanOrEqual(60);
    expect(longer.choices[0]?.text.startsWith(early?.text ?? "-")).toBe(true);
    // a stop string: the first occurrence whose last character comes at token 20 or after
    const prompt = prompts[7] ?? "";
    const text = await referenceGreedy(prompt, 80);
    const stop = " of ";
    let at = text.indexOf(stop);
    while (at >= 0 && at + stop.length < 20) at = text.indexOf(stop, at + 1);
    expect(at).toBeGreaterThan(text.indexOf(stop));
    const stopped = await openai.completions.create({
      ...greedy,
      prompt,
      stop: [stop],
      min_tokens: 20,
    } as typeof greedy & { prompt: string });
    expect(stopped.choices[0]).toMatchObject({ text: text.slice(0, at), finish_reason: "stop" });
    const refused = await stack.post("/v1/completions", { ...ask, max_tokens: 5, min_tokens: 6 });
    expect(refused.status).toBe(400);
  });

  it("logit changes out of range are refused by name, and vLLM's fields Ferry lacks are refused, not ignored", async () => {
    const refused = (body: Record<string, unknown>) =>
      refusal("/v1/completions", { model: "tiny-lm", prompt: "a", ...body });
    expect(await refused({ logit_bias: { "257": 5 } })).toBe(
      "logit_bias: token id 257 is out of vocabulary (this model has 257 tokens)",
    );
    expect(await refused({ logit_bias: { e: 5 } })).toMatch(/^logit_bias\.e: Invalid key/);
    expect(await refused({ logit_bias: { "5": 101 } })).toMatch(/^logit_bias\.5: /);
    expect(await refused({ frequency_penalty: 2.5 })).toMatch(/^frequency_penalty: /);
    expect(await refused({ repetition_penalty: 0 })).toMatch(/^repetition_penalty: /);
    expect(await refused({ min_p: 1.5 })).toMatch(/^min_p: /);
    expect(await refused({ logprobs: 21 })).toMatch(/^logprobs: /);
    for (const field of ["use_beam_search", "guided_whitespace_pattern"])
      expect(await refused({ [field]: field === "use_beam_search" ? true : 5 })).toBe(
        `${field}: ${field} is not supported by this server`,
      );
  });

  it("the same seed gives the same text, whatever else shares the batch", async () => {
    const request = {
      model: "tiny-lm",
      prompt: "Once upon a time",
      max_tokens: 24,
      temperature: 0.9,
      top_p: 0.95,
      seed: 1234,
    };
    const alone = await openai.completions.create(request);
    const crowd = await Promise.all([
      openai.completions.create(request),
      ...prompts.map((prompt, k) =>
        openai.completions.create({ model: "tiny-lm", prompt, max_tokens: 16 + k, temperature: 1 }),
      ),
    ]);
    expect(crowd[0]?.choices[0]?.text).toBe(alone.choices[0]?.text);
    const other = await openai.completions.create({ ...request, seed: 4321 });
    expect(other.choices[0]?.text).not.toBe(alone.choices[0]?.text);
  });

  it("honours stop strings (never sending them) and max_tokens", async () => {
    const full =
      (
        await openai.completions.create({
          model: "tiny-lm",
          prompt: prompts[1] ?? "",
          max_tokens: 40,
          temperature: 0,
        })
      ).choices[0]?.text ?? "";
    const stop = full.slice(6, 8);
    const stopped = await openai.completions.create({
      model: "tiny-lm",
      prompt: prompts[1] ?? "",
      max_tokens: 40,
      temperature: 0,
      stop: [stop],
    });
    expect(stopped.choices[0]?.finish_reason).toBe("stop");
    expect(stopped.choices[0]?.text).toBe(full.slice(0, full.indexOf(stop)));
    const short = await openai.completions.create({
      model: "tiny-lm",
      prompt: "Hello",
      max_tokens: 3,
      temperature: 0,
    });
    expect(short.usage?.completion_tokens).toBe(3);
    expect(short.choices[0]?.finish_reason).toBe("length");
  });

  it("rejects bad requests with OpenAI-shaped errors", async () => {
    await expect(
      openai.completions.create({ model: "tiny-lm", prompt: "x", max_tokens: 0 }),
    ).rejects.toMatchObject({ status: 400 });
    await expect(openai.completions.create({ model: "nope", prompt: "x" })).rejects.toMatchObject({
      status: 404,
    });
    const res = await stack.post("/v1/completions", {
      model: "tiny-lm",
      prompt: "x",
      max_tokens: 5000,
    });
    expect(res.status).toBe(400);
    expect(
      ((await res.json()) as { error: { message: string; type: string } }).error,
    ).toMatchObject({ type: "invalid_request_error" });
  });
});

describe("lossless job event streams", () => {
  const submit = async (prompt: string, maxTokens: number) => {
    const res = await stack.post("/v1/jobs", {
      model: "tiny-lm",
      input: { prompt, max_tokens: maxTokens, temperature: 0 },
    });
    expect(res.status).toBe(202);
    return ((await res.json()) as { id: string }).id;
  };
  const events = (id: string, lastEventId?: string, abort?: AbortController) =>
    fetch(stack.url(`/v1/jobs/${id}/events`), {
      headers: lastEventId ? { "Last-Event-ID": lastEventId } : {},
      ...(abort ? { signal: abort.signal } : {}),
    });

  it("a reader that drops mid-stream and reconnects with Last-Event-ID gets exactly the rest", async () => {
    const id = await submit(prompts[2] ?? "", 64);
    const seen: Array<{ id: string; type: string; data: Record<string, unknown> }> = [];
    const first = new AbortController();
    await readSse(
      await events(id, undefined, first),
      (e) => {
        seen.push({ id: e.id ?? "", type: e.event ?? "", data: JSON.parse(e.data) });
        return seen.filter((s) => s.type === "token").length >= 3 ? "stop" : undefined;
      },
      first,
    );
    const lastId = seen.at(-1)?.id;
    await readSse(await events(id, lastId), (e) => {
      seen.push({ id: e.id ?? "", type: e.event ?? "", data: JSON.parse(e.data) });
      return undefined;
    });
    const ids = seen.map((s) => s.id);
    expect(new Set(ids).size).toBe(ids.length); // nothing twice
    expect(seen.at(-1)?.type).toBe("done");
    const text = seen
      .filter((s) => s.type === "token")
      .map((s) => s.data.text)
      .join("");
    const result = seen.find((s) => s.type === "result")?.data.result as { text: string };
    expect(text).toBe(result.text);
    expect(text).toBe(await referenceGreedy(prompts[2] ?? "", 64));
  });

  it("a reader that connects after the job finished gets the whole stream", async () => {
    const id = await submit(prompts[3] ?? "", 16);
    await waitFor(
      async () =>
        ((await (await fetch(stack.url(`/v1/jobs/${id}`))).json()) as { status: string }).status ===
        "succeeded",
      30_000,
    );
    const types: string[] = [];
    let text = "";
    await readSse(await events(id), (e) => {
      types.push(e.event ?? "");
      if (e.event === "token") text += (JSON.parse(e.data) as { text: string }).text;
      return undefined;
    });
    expect(types[0]).toBe("status");
    expect(types.slice(-2)).toEqual(["result", "done"]);
    const job = (await (await fetch(stack.url(`/v1/jobs/${id}`))).json()) as {
      result: { choices: Array<{ text: string }> };
    };
    expect(text).toBe(job.result.choices[0]?.text);
  });

  it("unknown job: 404", async () => {
    expect((await events("no-such-job")).status).toBe(404);
  });
});

describe("cancellation frees the batch slot", () => {
  it.each([false, true])(
    "a client of several prompts that goes away cancels every one of them, and only those (stream: %s)",
    async (stream) => {
      const before = await workerMetric("ferry_worker_cancelled_sequences_total");
      const post = (body: object, signal?: AbortSignal) =>
        fetch(stack.url("/v1/completions"), {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "tiny-lm", max_tokens: 220, ignore_eos: true, ...body }),
          ...(signal ? { signal } : {}),
        });
      const abort = new AbortController();
      const gone = post({ prompt: ["Long ago", "Far away", "Once more"], stream }, abort.signal)
        .then((res) => res.text())
        .catch(() => undefined);
      const stays = post({ prompt: ["Stay", "Here"] });
      await waitFor(
        async () => (await workerMetric("ferry_worker_running_sequences")) >= 5,
        10_000,
      );
      abort.abort();
      await gone;
      const kept = (await (await stays).json()) as CompletionBody;
      expect(kept.choices.map((c) => c.finish_reason)).toEqual(["length", "length"]);
      expect(kept.usage.completion_tokens).toBe(440);
      expect(await workerMetric("ferry_worker_cancelled_sequences_total")).toBe(before + 3);
    },
  );

  it("a streaming client that disconnects is cancelled at the next decode step", async () => {
    const before = await workerMetric("ferry_worker_cancelled_sequences_total");
    const neighbours = busyNeighbours(stack, 8);
    const abort = new AbortController();
    const res = await fetch(stack.url("/v1/completions"), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "tiny-lm",
        prompt: "Long ago",
        max_tokens: 200,
        temperature: 0.8,
        ignore_eos: true,
        stream: true,
      }),
      signal: abort.signal,
    });
    let chunks = 0;
    await readSse(res, () => (++chunks >= 2 ? "stop" : undefined), abort);
    try {
      await waitFor(
        async () => (await workerMetric("ferry_worker_cancelled_sequences_total")) > before,
        10_000,
      );
    } finally {
      await neighbours.stop();
    }
    await waitFor(async () => (await workerMetric("ferry_worker_running_sequences")) === 0, 10_000);
  });

  it("DELETE stops a running generation job", async () => {
    const res = await stack.post("/v1/jobs", {
      model: "tiny-lm",
      input: { prompt: "Far away", max_tokens: 200, temperature: 0.8, ignore_eos: true },
    });
    const { id } = (await res.json()) as { id: string };
    await waitFor(
      async () =>
        ((await (await fetch(stack.url(`/v1/jobs/${id}`))).json()) as { status: string }).status ===
        "running",
      10_000,
    );
    const del = await fetch(stack.url(`/v1/jobs/${id}`), { method: "DELETE" });
    expect(((await del.json()) as { status: string }).status).toBe("cancelled");
    await waitFor(async () => (await workerMetric("ferry_worker_running_sequences")) === 0, 10_000);
    const job = (await (await fetch(stack.url(`/v1/jobs/${id}`))).json()) as {
      status: string;
      error: { code: string };
    };
    expect(job).toMatchObject({ status: "cancelled", error: { code: "CANCELLED" } });
  });
});

describe("prefix caching of finished completions (scheduler.prefix_cache_completions)", () => {
  const base = JSON.parse(readFileSync("models/tiny-lm/model.json", "utf8")) as {
    scheduler: Record<string, unknown>;
  };
  const repo = tempRepository({
    "tiny-lm": { scheduler: { ...base.scheduler, prefix_cache_completions: true } },
  });
  const own = new Stack({ env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "tiny-lm" } });
  let keeping: OpenAI;
  beforeAll(async () => {
    await own.start();
    keeping = new OpenAI({ baseURL: own.url("/v1"), apiKey: "unused", maxRetries: 0 });
  });
  afterAll(() => own.stop());

  it("a prompt that goes on from an answer reads from where the cache ends, and answers as the reference does", async () => {
    const first = "Q: What does the cat know that we do not?\nA:";
    const one = await keeping.completions.create({
      model: "tiny-lm",
      prompt: first,
      max_tokens: 40,
      temperature: 0,
    });
    const written = one.choices[0]?.text ?? "";
    const next = `${first}${written} So`;
    const two = await keeping.completions.create({
      model: "tiny-lm",
      prompt: next,
      max_tokens: 12,
      temperature: 0,
    });
    // more than the first prompt's own blocks: the answer's came from the cache as well
    const cached = two.usage?.prompt_tokens_details?.cached_tokens ?? 0;
    expect(cached).toBeGreaterThan(Math.floor(Buffer.byteLength(first) / 16) * 16);
    expect(cached).toBeLessThanOrEqual(Buffer.byteLength(next) - 1);
    expect(two.choices[0]?.text).toBe(await referenceGreedy(next, 12));
  });

  it("a chat's next turn reads its earlier answer from the cache: the template writes it back as it was generated", async () => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: "system", content: "You are a fortune cookie who answers at length." },
      { role: "user", content: "What will tomorrow bring?" },
    ];
    const first = await keeping.chat.completions.create({
      model: "tiny-lm",
      messages,
      max_tokens: 40,
      temperature: 0,
    });
    const answer = first.choices[0]?.message.content ?? "";
    const firstPrompt = first.usage?.prompt_tokens ?? 0;
    const second = await keeping.chat.completions.create({
      model: "tiny-lm",
      messages: [
        ...messages,
        { role: "assistant", content: answer },
        { role: "user", content: "And then?" },
      ],
      max_tokens: 4,
      temperature: 0,
    });
    // past the first turn's own prompt: part of the answer came from the cache too
    expect(second.usage?.prompt_tokens_details?.cached_tokens ?? 0).toBeGreaterThan(
      Math.floor(firstPrompt / 16) * 16,
    );
  });
});
