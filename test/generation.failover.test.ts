import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "./helpers/stack.js";

// Short locks: a dead worker's completions go to another one within about two seconds.
const stack = new Stack({
  env: { WORKER_MODELS: "tiny-lm" },
  workerEnv: { LOCK_DURATION_MS: "2000", STALLED_INTERVAL_MS: "1000" },
});
let openai: OpenAI;
beforeAll(async () => {
  await stack.start();
  openai = new OpenAI({ baseURL: stack.url("/v1"), apiKey: "not-needed", maxRetries: 0 });
});
afterAll(() => stack.stop());

const requests = [
  { prompt: "The meaning of life is", temperature: 0 },
  { prompt: "Once upon a time", temperature: 0 },
  { prompt: "A man walks into a bar", temperature: 0 },
  { prompt: "Never trust a", temperature: 0 },
  { prompt: "You will", temperature: 0.9, seed: 7 },
  { prompt: "Love is", temperature: 0.9, seed: 11 },
  { prompt: "The best way to", temperature: 1, seed: 3, stop: ["\n\n"] },
  { prompt: "Q: What is a computer?\nA:", temperature: 0.7, seed: 5 },
];
const MAX_TOKENS = 160;
/** vLLM's extension, which Ferry accepts: every stream runs its full length. */
type Extra = { ignore_eos: boolean };

describe("a worker dies mid-stream", () => {
  it("its streams continue on another worker: every client gets the uninterrupted text, nothing twice", async () => {
    const received = requests.map(() => ({ text: "", before: 0, after: 0 }));
    let killed = false;
    const streams = requests.map(async (req, i) => {
      const body: OpenAI.CompletionCreateParamsStreaming & Extra = {
        model: "tiny-lm",
        max_tokens: MAX_TOKENS,
        ignore_eos: true,
        stream: true,
        ...req,
      };
      const stream = await openai.completions.create(body);
      const seen = received[i] as { text: string; before: number; after: number };
      for await (const chunk of stream) {
        const text = chunk.choices[0]?.text ?? "";
        seen.text += text;
        if (text) seen[killed ? "after" : "before"]++;
      }
    });
    // beside them, one answered whole, echoed, with each token's log probability: the worker
    // that finishes it has the earlier tokens' only from the dead one's log, and the echo
    // went out in the dead one's first token event
    const wholeBody: OpenAI.CompletionCreateParamsNonStreaming & Extra = {
      model: "tiny-lm",
      prompt: "Never trust a",
      max_tokens: MAX_TOKENS,
      ignore_eos: true,
      temperature: 0,
      logprobs: 1,
      echo: true,
    };
    const whole = openai.completions.create(wholeBody);
    // kill once every stream has shown some text, well before any can finish
    while (received.some((r) => r.before < 3)) await new Promise((r) => setTimeout(r, 5));
    const victim = stack.workers[0];
    victim?.child.kill("SIGKILL");
    killed = true;
    await victim?.exited;
    await stack.startWorker();
    await Promise.all(streams);

    // the same requests again, on a healthy worker and without streaming: the reference text
    const reference = await Promise.all(
      requests.map((req) => {
        const body: OpenAI.CompletionCreateParamsNonStreaming & Extra = {
          model: "tiny-lm",
          max_tokens: MAX_TOKENS,
          ignore_eos: true,
          ...req,
        };
        return openai.completions.create(body);
      }),
    );
    const resumed = received.filter((r) => r.before > 0 && r.after > 0).length;
    expect(resumed).toBeGreaterThan(0);
    received.forEach((r, i) => {
      expect(r.text).toBe(reference[i]?.choices[0]?.text);
    });
    const [answered, again] = await Promise.all([whole, openai.completions.create(wholeBody)]);
    const logprobs = answered.choices[0]?.logprobs;
    expect(answered.choices[0]?.text.startsWith("Never trust a")).toBe(true);
    expect(logprobs?.tokens).toHaveLength("Never trust a".length + MAX_TOKENS);
    expect(logprobs?.tokens?.join("")).toBe(answered.choices[0]?.text);
    expect(logprobs?.tokens).toEqual(again.choices[0]?.logprobs?.tokens);
    for (const [i, logprob] of (again.choices[0]?.logprobs?.token_logprobs ?? []).entries())
      expect(logprobs?.token_logprobs?.[i]).toBeCloseTo(logprob, 3);
  });

  it("a stream alone on its worker, killed from outside as it decodes, continues too: a power cut is not the stream's crash", async () => {
    const body: OpenAI.CompletionCreateParamsStreaming & Extra = {
      model: "tiny-lm",
      prompt: "It was a dark and stormy night",
      max_tokens: MAX_TOKENS,
      ignore_eos: true,
      temperature: 0,
      stream: true,
    };
    const seen = { text: "", before: 0, after: 0 };
    let killed = false;
    const stream = (async () => {
      for await (const chunk of await openai.completions.create(body)) {
        const text = chunk.choices[0]?.text ?? "";
        seen.text += text;
        if (text) seen[killed ? "after" : "before"]++;
      }
    })();
    while (seen.before < 3) await new Promise((r) => setTimeout(r, 5));
    const victim = stack.workers.find((w) => w.child.exitCode === null && !w.child.killed);
    victim?.child.kill("SIGKILL");
    killed = true;
    await victim?.exited;
    await stack.startWorker();
    await stream;
    const reference = await openai.completions.create({ ...body, stream: false });
    expect(seen.after).toBeGreaterThan(0);
    expect(seen.text).toBe(reference.choices[0]?.text);
  });
});
