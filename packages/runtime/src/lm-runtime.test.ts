import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LmRuntime } from "./lm-runtime.js";

const MODEL = "models/tiny-lm/1/model.onnx";
const arch = (
  JSON.parse(readFileSync("models/tiny-lm/model.json", "utf8")) as {
    architecture: { n_layer: number; n_head: number; head_dim: number; vocab_size: number };
  }
).architecture;
const shape = {
  layers: arch.n_layer,
  kvHeads: arch.n_head,
  headDim: arch.head_dim,
  vocab: arch.vocab_size,
};
const options = { executionProvider: "cpu" as const, intraOpThreads: 1 };
const bytes = (text: string) => Array.from(Buffer.from(text, "utf8"));

let batched: LmRuntime;
let alone: LmRuntime;
beforeAll(async () => {
  [batched, alone] = await Promise.all([
    LmRuntime.load(MODEL, shape, options),
    LmRuntime.load(MODEL, shape, options),
  ]);
});
afterAll(async () => {
  await Promise.all([batched.close(), alone.close()]);
});

/** The same rows stepped one sequence at a time: what each would compute on its own. */
async function reference(rows: Array<{ seq: number; tokens: number[] }>) {
  const out: Float32Array[] = [];
  for (const row of rows) out.push(...(await alone.step([row])));
  return out;
}

async function expectSame(rows: Array<{ seq: number; tokens: number[] }>) {
  const [got, want] = await Promise.all([batched.step(rows), reference(rows)]);
  expectClose(got, want);
}

function expectClose(got: Float32Array[], want: Float32Array[]) {
  expect(got).toHaveLength(want.length);
  got.forEach((logits, i) => {
    const w = want[i] ?? new Float32Array();
    let worst = 0;
    for (let k = 0; k < logits.length; k++)
      worst = Math.max(worst, Math.abs((logits[k] ?? 0) - (w[k] ?? 0)));
    expect(worst).toBeLessThan(1e-3);
  });
}

/** One decode step per token, every sequence in `seqs` (in that order) taking it. */
async function decodeEach(seqs: number[], tokens: number[]) {
  for (const t of tokens) await expectSame(seqs.map((seq) => ({ seq, tokens: [t] })));
}

function releaseBoth(seq: number) {
  batched.release([seq]);
  alone.release([seq]);
}

describe("LmRuntime's KV caches", () => {
  it("batched steps, as sequences join and leave, compute what each sequence computes alone", async () => {
    // two prompts of different lengths prefill together, then decode as a batch
    await expectSame([
      { seq: 1, tokens: bytes("Once upon a time") },
      { seq: 2, tokens: bytes("Love is") },
    ]);
    for (const t of [32, 116, 104]) {
      await expectSame([
        { seq: 1, tokens: [t] },
        { seq: 2, tokens: [t + 1] },
      ]);
    }
    // a third joins: its prefill runs alone while the other two's batch waits untouched
    await expectSame([{ seq: 3, tokens: bytes("Never trust a") }]);
    await decodeEach([1, 2, 3], [101, 32]);
    // a short one leaves: its row runs empty, then a newcomer is seated in it
    releaseBoth(2);
    await decodeEach([1, 3], [104, 105]);
    await expectSame([{ seq: 5, tokens: bytes("A man") }]);
    await decodeEach([3, 5, 1], [97, 110]);
    // the longest leaves; the rest go on without it
    releaseBoth(1);
    await decodeEach([5, 3], [97, 110]);
    // a prompt and a decode in one pass (mixed prefill), then decoding again
    await expectSame([
      { seq: 4, tokens: bytes("You will") },
      { seq: 5, tokens: [33] },
    ]);
    await decodeEach([5, 3, 4], [10]);
  });

  it("prompts prefilled on a thread of their own decode on the decode thread as if run there", async () => {
    const split = await LmRuntime.load(MODEL, shape, options, { prefillThread: true });
    try {
      const a = { seq: 101, tokens: bytes("Once upon a time") };
      const b = { seq: 102, tokens: bytes("Love is") };
      expectClose(await split.prefill([a]), await reference([a]));
      // b's prompt runs while a decode step of a is in flight
      const [stepped, joined] = await Promise.all([
        split.step([{ seq: 101, tokens: [32] }]),
        split.prefill([b]),
      ]);
      expectClose(stepped, await reference([{ seq: 101, tokens: [32] }]));
      expectClose(joined, await reference([b]));
      for (const t of [116, 104, 101]) {
        const rows = [
          { seq: 102, tokens: [t] },
          { seq: 101, tokens: [t] },
        ];
        expectClose(await split.step(rows), await reference(rows));
      }
      split.release([101]);
      const rows = [{ seq: 102, tokens: [33] }];
      expectClose(await split.step(rows), await reference(rows));
    } finally {
      await split.close();
    }
  });

  it("scores a prompt position by position in a padded batch, as feeding it a token at a time gives", async () => {
    const long = bytes("Once upon a time");
    const short = bytes("Love is");
    const { logits, prompts } = await batched.prefillScored([
      { seq: 201, tokens: short, scorePrompt: { length: short.length, top: 3 } },
      { seq: 202, tokens: long },
    ]);
    expect(logits).toHaveLength(2);
    expect(prompts.map((p) => p.seq)).toEqual([201]);
    const scores = prompts[0];
    // the same prompt fed one token at a time: position j's logits, after token j
    for (const [j, token] of short.slice(0, -1).entries()) {
      const [at] = await alone.step([{ seq: 301, tokens: [token] }]);
      const row = at ?? new Float32Array();
      const max = Math.max(...row);
      const logZ = max + Math.log(row.reduce((sum, v) => sum + Math.exp(v - max), 0));
      expect(scores?.logprobs[j]).toBeCloseTo((row[short[j + 1] ?? 0] ?? 0) - logZ, 3);
      const ranked = [...row.keys()].sort((a, b) => (row[b] ?? 0) - (row[a] ?? 0));
      expect([...(scores?.topIds.subarray(j * 3, j * 3 + 3) ?? [])]).toEqual(ranked.slice(0, 3));
    }
    batched.release([201, 202]);
    alone.release([301]);
  });
});

/**
 * A runtime that keeps prompts' caches (on a prefill thread too, when asked, every prompt kept
 * handed over at once, so that the next request finds it there), closed after `use`.
 */
async function withCaching(prefillThread: boolean, use: (lm: LmRuntime) => Promise<void>) {
  const lm = await LmRuntime.load(MODEL, shape, options, {
    prefillThread,
    prefixCacheBytes: 8 << 20,
    prefixShareMs: 0,
  });
  try {
    await use(lm);
  } finally {
    await lm.close();
  }
}

describe("prefix caching", () => {
  it("a prompt read on top of a kept prefix gives the logits of the whole prompt read at once, and decodes on the same", async () => {
    await withCaching(false, async (cached) => {
      const system = bytes("System: You are a terse assistant who answers in one line.\nQ: ");
      const first = [...system, ...bytes("Why is the sky blue?\nA:")];
      const second = [...system, ...bytes("Explain a monad.\nA:")];
      const out = await cached.stepScored([{ seq: 901, tokens: first }]);
      expect(out.cached).toEqual([0]);
      const again = await cached.stepScored([
        { seq: 902, tokens: second },
        { seq: 903, tokens: bytes("Short") },
      ]);
      // the system prompt's whole blocks came from the cache; a short prompt has none
      expect(again.cached).toEqual([Math.floor(system.length / 16) * 16, 0]);
      expectClose(again.logits.slice(0, 1), await reference([{ seq: 904, tokens: second }]));
      // decoding goes on from the cache it was given, as from one it computed
      for (const t of bytes(" It")) {
        expectClose(
          await cached.step([{ seq: 902, tokens: [t] }]),
          await reference([{ seq: 904, tokens: [t] }]),
        );
      }
      // a scored prompt reads every position: nothing is taken from the cache
      const scored = await cached.stepScored([
        { seq: 905, tokens: second, scorePrompt: { length: second.length, top: 1 } },
      ]);
      expect(scored.cached).toEqual([0]);
      cached.release([901, 902, 903, 905]);
      alone.release([904]);
    });
  });

  it("a finished sequence's cache, completion included, begins a later prompt that goes on from it", async () => {
    await withCaching(true, async (split) => {
      const prompt = bytes("Q: Tell me a fortune.\nA:");
      await split.prefill([{ seq: 921, tokens: prompt }]);
      // its completion, fed a token per decode step, as the engine feeds what it samples
      const written = bytes(" You will meet a tall stranger");
      for (const t of written) await split.step([{ seq: 921, tokens: [t] }]);
      const retained = split.retain(921, [...prompt, ...written]);
      split.release([921]);
      await retained;
      const reading = prompt.length + written.length;
      // on either thread, each going its own way after it: the decode thread kept it, and
      // handed it to the prefill thread
      const next = [...prompt, ...written, ...bytes(".\nQ: When?\nA:")];
      const other = [...prompt, ...written, ...bytes(", and lose a glove.")];
      const onPrefiller = await split.prefillScored([{ seq: 922, tokens: next }]);
      const onDecoder = await split.stepScored([{ seq: 923, tokens: other }]);
      expect(onPrefiller.cached).toEqual([Math.floor(reading / 16) * 16]);
      expect(onDecoder.cached).toEqual([Math.floor(reading / 16) * 16]);
      expectClose(onDecoder.logits, await reference([{ seq: 924, tokens: other }]));
      split.release([922, 923]);
      alone.release([924]);
    });
  });

  it("with a prefill thread, what one thread keeps the other finds: a prompt prefilled on one begins a prompt read on the other", async () => {
    await withCaching(true, async (split) => {
      const preamble = bytes("System: Be brief, be kind, and mention the sea.\nQ: ");
      const blocks = Math.floor(preamble.length / 16) * 16;
      const first = await split.prefillScored([
        { seq: 911, tokens: [...preamble, ...bytes("Hi?")] },
      ]);
      expect(first.cached).toEqual([0]);
      // on the decode thread (a step), then back on the prefill thread
      const second = [...preamble, ...bytes("Why?")];
      const onDecoder = await split.stepScored([{ seq: 912, tokens: second }]);
      expect(onDecoder.cached).toEqual([blocks]);
      expectClose(onDecoder.logits, await reference([{ seq: 913, tokens: second }]));
      const third = await split.prefillScored([
        { seq: 914, tokens: [...preamble, ...bytes("Yes?")] },
      ]);
      expect(third.cached).toEqual([blocks]);
      split.release([911, 912, 914]);
      alone.release([913]);
    });
  });
});
