import { GrammarEngine } from "@ferry/guided/engine";
import { ByteTokenizer } from "@ferry/model-repository";
import {
  type FerryError,
  type GenerateJob,
  type SamplingParams,
  samplingParamsSchema,
  WIRE_VERSION,
} from "@ferry/protocol";
import type { LmOutput, StepRow } from "@ferry/runtime";
import { afterAll, describe, expect, it } from "vitest";
import { Engine, type EngineRuntime } from "./engine.js";
import type { GenerationMetrics } from "./generation-metrics.js";
import { Scheduler } from "./scheduler.js";

const VOCAB = 257;
const EOS = 256;

/**
 * A model that, after token t, likes t + 1 best (bytes counting up), and records every pass:
 * which sequences ran together and how many tokens each fed.
 */
class CountingModel implements EngineRuntime {
  readonly passes: Array<Array<{ seq: number; tokens: number }>> = [];
  readonly released: number[] = [];

  async stepScored(rows: StepRow[]): Promise<LmOutput> {
    return this.run(rows);
  }

  async prefillScored(rows: StepRow[]): Promise<LmOutput> {
    return this.run(rows);
  }

  async retain(): Promise<void> {}

  release(seqs: number[]): void {
    this.released.push(...seqs);
  }

  private async run(rows: StepRow[]): Promise<LmOutput> {
    await new Promise((r) => setImmediate(r));
    this.passes.push(rows.map((r) => ({ seq: r.seq, tokens: r.tokens.length })));
    const logits = rows.map((row) => {
      const out = new Float32Array(VOCAB);
      const last = row.tokens.at(-1) ?? 0;
      out[(last + 1) % EOS] = 10;
      return out;
    });
    return { logits, prompts: [], cached: rows.map(() => 0) };
  }
}

const counter = { inc() {}, set() {}, observe() {} };
const metrics: GenerationMetrics = {
  ttft: counter,
  interToken: counter,
  running: counter,
  waiting: counter,
  tokens: counter,
  cancelled: counter,
  resumed: counter,
  preempted: counter,
  prefixQueries: counter,
  prefixHits: counter,
  execution() {},
  finished() {},
};

function job(
  prompt: string,
  params: Partial<SamplingParams> = {},
  deadline = Date.now() + 60_000,
): GenerateJob {
  return {
    v: WIRE_VERSION,
    kind: "generate",
    model: "m",
    version: "1",
    prompt,
    params: samplingParamsSchema.parse({
      max_tokens: 8,
      temperature: 0,
      top_p: 1,
      top_k: 0,
      stop: [],
      ...params,
    }),
    deadline,
    accepted_at: Date.now(),
  };
}

const grammars = new GrammarEngine();
afterAll(() => grammars.shutdown());

function engine(model = new CountingModel(), maxNumSeqs = 4, prefillThread = false) {
  const scheduler = new Scheduler({ maxNumSeqs, maxBatchedTokens: 2048 });
  return new Engine(
    model,
    scheduler,
    new ByteTokenizer(EOS),
    metrics,
    { contextLength: 64, vocabSize: VOCAB, prefillThread },
    grammars,
  );
}

const run = (e: Engine, j: GenerateJob, signal = new AbortController().signal, priority = 5) =>
  e.submit(j, signal, () => {}, { priority });

describe("Engine", () => {
  it("decodes every running sequence in one pass per step; each ends at max_tokens", async () => {
    const model = new CountingModel();
    const e = engine(model);
    const [a, b] = await Promise.all([run(e, job("a")), run(e, job("k", { max_tokens: 3 }))]);
    expect(a.text).toBe("bcdefghi");
    expect(a.finish_reason).toBe("length");
    expect(b.text).toBe("lmn");
    // after both prompts are in, the two decode in the same passes
    const shared = model.passes.filter((p) => p.length === 2 && p.every((r) => r.tokens === 1));
    expect(shared.length).toBeGreaterThanOrEqual(2);
    expect(model.released.sort()).toEqual([1, 2]);
  });

  it("a seat freed by a finished sequence is taken at the next step (continuous batching)", async () => {
    const model = new CountingModel();
    const e = engine(model, 1);
    const results = await Promise.all([
      run(e, job("a", { max_tokens: 2 })),
      run(e, job("x", { max_tokens: 2 })),
    ]);
    expect(results.map((r) => r.text)).toEqual(["bc", "yz"]);
    expect(Math.max(...model.passes.map((p) => p.length))).toBe(1);
  });

  it("allowed_token_ids and stop_token_ids change what is drawn and where it ends", async () => {
    const e = engine();
    const only = await run(e, job("a", { allowed_token_ids: [120, 121], max_tokens: 3 }));
    expect(only.text).toMatch(/^[xy]{3}$/);
    const stopped = await run(e, job("a", { stop_token_ids: ["d".charCodeAt(0)] }));
    expect(stopped.text).toBe("bcd");
    expect(stopped.finish_reason).toBe("stop");
  });

  it("guided by a choice, the answer is one of them however the model leans", async () => {
    const e = engine();
    const result = await run(e, job("a", { guided_choice: ["no", "maybe"], max_tokens: 10 }));
    expect(["no", "maybe"]).toContain(result.text);
    expect(result.finish_reason).toBe("stop");
  });

  it("whenIdle waits for a guided sequence whose grammar still compiles (a version swapped out finishes what it took)", async () => {
    const e = engine();
    // a grammar that takes a while, distinct from every other test's
    const choices = Array.from({ length: 256 }, (_, i) => `${i}-idle-`.padEnd(512, "q"));
    const running = run(e, job("a", { guided_choice: choices, max_tokens: 4 }));
    let idle = false;
    const waited = e.whenIdle().then(() => {
      idle = true;
    });
    // it had been idle at once: the sequence was not yet in the scheduler, and the grammar
    // engine shut down under it (UNAVAILABLE)
    await new Promise((r) => setTimeout(r, 50));
    expect(idle).toBe(false);
    const result = await running;
    await waited;
    expect(result.finish_reason).toBe("length");
  });

  it("a guided sequence whose grammar thread is replaced while its step runs finishes as it would have", async () => {
    let entered: () => void = () => {};
    const stepping = new Promise<void>((r) => {
      entered = r;
    });
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    class HeldModel extends CountingModel {
      override async stepScored(rows: StepRow[]): Promise<LmOutput> {
        entered();
        await held;
        return super.stepScored(rows);
      }
    }
    const e = engine(new HeldModel());
    const done = run(e, job("a", { guided_choice: ["no", "maybe"], max_tokens: 10 }));
    await stepping;
    // a spec that traps XGrammar's WebAssembly, from anyone: the thread is replaced, and every
    // guide rebuilt, while this sequence's step is in flight
    const restarts = grammars.restarts;
    const trap = `root ::= ${"(".repeat(300)}"a"${")".repeat(300)}`;
    const other = grammars.vocabulary(new ByteTokenizer(EOS), VOCAB);
    await expect(grammars.open({ kind: "grammar", ebnf: trap }, other)).rejects.toThrow(
      /XGrammar failed compiling it/,
    );
    expect(grammars.restarts).toBe(restarts + 1);
    release();
    // before, its mask was gone when the step's logits came: the mask threw, and the engine
    // spun on a sequence it could neither advance nor drop
    const result = await done;
    expect(["no", "maybe"]).toContain(result.text);
  });

  it("a spec the grammar engine refuses fails that completion alone, as INVALID_INPUT", async () => {
    const e = engine();
    const [bad, good] = await Promise.allSettled([
      run(e, job("a", { guided_grammar: 'root ::= "a" |' })),
      run(e, job("a", { max_tokens: 2 })),
    ]);
    expect(bad.status === "rejected" && (bad.reason as FerryError).code).toBe("INVALID_INPUT");
    expect(good.status === "fulfilled" && good.value.text).toBe("bc");
  });

  it("a cancelled sequence leaves with CANCELLED; one whose deadline passed while queued is never run", async () => {
    const model = new CountingModel();
    const e = engine(model, 1);
    const cancel = new AbortController();
    const running = run(e, job("a", { max_tokens: 50 }), cancel.signal);
    const late = run(e, job("q", {}, Date.now() - 1));
    cancel.abort();
    await expect(running).rejects.toMatchObject({ code: "CANCELLED" });
    await expect(late).rejects.toMatchObject({ code: "DEADLINE_EXCEEDED" });
    expect(model.passes.flat().some((r) => r.seq === 2)).toBe(false);
  });

  it.each([false, true])(
    "an interactive completion takes a batch line's seat at once, and the line goes on where it was (prefill thread: %s)",
    async (prefillThread) => {
      const model = new CountingModel();
      const e = engine(model, 2, prefillThread);
      const ended: string[] = [];
      const line = (prompt: string) =>
        run(e, job(prompt, { max_tokens: 20 }), undefined, 1).then((r) => {
          ended.push(prompt);
          return r.text;
        });
      const lines = [line("a"), line("A")];
      while (model.passes.filter((p) => p.length === 2).length < 3)
        await new Promise((r) => setImmediate(r));
      const live = await run(e, job("0", { max_tokens: 3 }));
      ended.push("live");
      expect(live.text).toBe("123");
      expect(ended).toEqual(["live"]); // no line finished first
      // each line's text is what it would have been had it never given its seat up
      expect(await Promise.all(lines)).toEqual(["bcdefghijklmnopqrstu", "BCDEFGHIJKLMNOPQRSTU"]);
      // the preempted line's cache was freed, and its rejoining prefill read prompt and tokens so far
      const rejoined = model.passes.flat().filter((r) => r.seq === 2 && r.tokens > 1);
      expect(rejoined.length).toBe(1);
      expect(model.released.slice(0, 2)).toEqual([2, 3]);
    },
  );
});

/** CountingModel whose next prefill, once `hold` is called, waits until `let go`. */
class HeldPrefillModel extends CountingModel {
  private gate: Promise<void> | undefined;
  held = false;
  letGo = () => {};

  hold(): void {
    this.gate = new Promise((resolve) => {
      this.letGo = resolve;
    });
  }

  override async prefillScored(rows: StepRow[]): Promise<LmOutput> {
    const gate = this.gate;
    this.gate = undefined;
    if (gate) {
      this.held = true;
      await gate;
    }
    return super.prefillScored(rows);
  }
}

/**
 * Two batch lines decoding on an engine with a prefill thread, then an interactive prompt
 * whose prefill is held: the passes so far, and the completions to await once it is let go.
 */
async function linesBesideHeldPrompt() {
  const model = new HeldPrefillModel();
  const e = engine(model, 4, true);
  const lines = [1, 2].map((k) => run(e, job(`line ${k}`, { max_tokens: 30 }), undefined, 1));
  while (model.passes.filter((p) => p.length === 2).length < 2)
    await new Promise((r) => setImmediate(r));
  model.hold();
  const live = run(e, job("0", { max_tokens: 3 }));
  while (!model.held) await new Promise((r) => setImmediate(r));
  return { model, lines, live, before: model.passes.length };
}

describe("Engine, batch lines beside an interactive prompt", () => {
  it("a step of batch lines alone waits while an interactive prompt runs on the prefill thread", async () => {
    const { model, lines, live, before } = await linesBesideHeldPrompt();
    for (let k = 0; k < 20; k++) await new Promise((r) => setImmediate(r));
    // no decode pass of the lines while the prompt runs: the step would take its core
    expect(model.passes.length).toBe(before);
    model.letGo();
    expect((await live).text).toBe("123");
    await Promise.all(lines);
  });

  it("waits a while at a time only: prompts that keep coming do not stop the lines for good", async () => {
    const { model, lines, live, before } = await linesBesideHeldPrompt();
    // past the longest wait, the lines step again though the prompt still runs
    await new Promise((r) => setTimeout(r, 120));
    expect(model.passes.length).toBeGreaterThan(before);
    model.letGo();
    await live;
    await Promise.all(lines);
  });
});
