import { describe, expect, it } from "vitest";
import { OutputProcessor } from "./output-processor.js";
import { Scheduler } from "./scheduler.js";
import { Sequence } from "./sequence.js";

const seq = (id: number, promptLength: number, enqueuedAt = performance.now()) => {
  const s = new Sequence({
    id,
    promptIds: new Array(promptLength).fill(1),
    params: { max_tokens: 8, temperature: 0, top_p: 1, top_k: 0, stop: [], ignore_eos: false },
    deadline: Number.POSITIVE_INFINITY,
    signal: new AbortController().signal,
    random: Math.random,
    decoder: { push: () => "", flush: () => "" },
    output: new OutputProcessor([]),
    emit: () => {},
    resolve: () => {},
    reject: () => {},
  });
  Object.assign(s, { enqueuedAt });
  return s;
};

/** What the engine does once a prefill returns: the first token is the next to feed. */
const prefilled = (...seqs: Sequence[]) => {
  for (const s of seqs) s.pending = 0;
};

describe("Scheduler", () => {
  it("admits waiting sequences at any step while seats last, and decodes every running one", () => {
    const s = new Scheduler({ maxNumSeqs: 2, maxBatchedTokens: 100 });
    const [a, b, c] = [seq(1, 5), seq(2, 5), seq(3, 5)];
    s.add(a);
    expect(s.schedule()).toEqual({ prefill: [a], decode: [] });
    s.add(b);
    s.add(c);
    expect(s.schedule()).toEqual({ prefill: [b], decode: [] }); // a's prefill has not returned
    expect(s.numWaiting).toBe(1);
    prefilled(a);
    expect(s.schedule()).toEqual({ prefill: [], decode: [a] });
    prefilled(b);
    s.remove(a); // a finished: its seat goes to c at the very next step
    expect(s.schedule()).toEqual({ prefill: [c], decode: [b] });
  });

  it("keeps prefill within the token budget, but never starves a long prompt", () => {
    const s = new Scheduler({ maxNumSeqs: 8, maxBatchedTokens: 10 });
    const [a, b, long] = [seq(1, 6), seq(2, 6), seq(3, 50)];
    s.add(a);
    s.add(b);
    expect(s.schedule().prefill).toEqual([a]);
    expect(s.schedule().prefill).toEqual([b]);
    s.add(long);
    expect(s.schedule().prefill).toEqual([long]);
  });

  it("static policy: a batch forms only when the previous one is done, full or after the wait", () => {
    const s = new Scheduler({
      maxNumSeqs: 2,
      maxBatchedTokens: 100,
      policy: "static",
      staticWaitMs: 1_000,
    });
    const [a, b, c] = [seq(1, 3), seq(2, 3), seq(3, 3)];
    s.add(a);
    expect(s.schedule().prefill).toEqual([]); // one is not a full batch, and it has not waited
    s.add(b);
    expect(s.schedule()).toEqual({ prefill: [a, b], decode: [] });
    prefilled(a, b);
    s.add(c);
    expect(s.schedule()).toEqual({ prefill: [], decode: [a, b] }); // c waits for the batch to end
    s.remove(a);
    s.remove(b);
    const old = seq(4, 3, performance.now() - 5_000);
    s.remove(c);
    s.add(old);
    expect(s.schedule().prefill).toEqual([old]); // waited long enough to go alone
  });
});
