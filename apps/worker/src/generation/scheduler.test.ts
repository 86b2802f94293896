import { describe, expect, it } from "vitest";
import { OutputProcessor } from "./output-processor.js";
import { Scheduler } from "./scheduler.js";
import { Sequence } from "./sequence.js";

const seq = (id: number, promptLength: number, enqueuedAt = performance.now(), priority = 5) => {
  const s = new Sequence({
    id,
    priority,
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
    expect(s.schedule()).toEqual({ prefill: [a], decode: [], preempted: [] });
    s.add(b);
    s.add(c);
    expect(s.schedule()).toEqual({ prefill: [b], decode: [], preempted: [] }); // a's prefill has not returned
    expect(s.numWaiting).toBe(1);
    prefilled(a);
    expect(s.schedule()).toEqual({ prefill: [], decode: [a], preempted: [] });
    prefilled(b);
    s.remove(a); // a finished: its seat goes to c at the very next step
    expect(s.schedule()).toEqual({ prefill: [c], decode: [b], preempted: [] });
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

  it("an interactive sequence takes a batch-band sequence's seat at once when batch holds every seat", () => {
    const s = new Scheduler({ maxNumSeqs: 2, maxBatchedTokens: 100 });
    const [a, b] = [seq(1, 3, undefined, 1), seq(2, 3, undefined, 1)];
    s.add(a);
    s.add(b);
    expect(s.schedule().prefill).toEqual([a, b]);
    prefilled(a, b);
    const live = seq(3, 3);
    s.add(live);
    // it does not wait for a batch line to finish: the latest-admitted batch one gives its seat up
    expect(s.schedule()).toEqual({ prefill: [live], decode: [a], preempted: [b] });
  });

  it("batch lines keep their share of seats while others wait, take every seat when none do, and rejoin first in their band", () => {
    const s = new Scheduler({ maxNumSeqs: 4, maxBatchedTokens: 100, batchSeatShare: 0.5 });
    const batch = [1, 2, 3, 4, 5].map((id) => seq(id, 3, undefined, 1));
    for (const b of batch) s.add(b);
    expect(s.schedule().prefill).toEqual(batch.slice(0, 4)); // nobody else waits: every seat
    prefilled(...batch.slice(0, 4));
    expect(s.schedule().preempted).toEqual([]);
    const live = [6, 7, 8].map((id) => seq(id, 3));
    for (const l of live) s.add(l);
    const plan = s.schedule();
    // three wait, but the batch band keeps half the seats: two yield, latest admitted first
    expect(plan.preempted).toEqual([batch[3], batch[2]]);
    expect(plan.prefill).toEqual(live.slice(0, 2));
    expect(plan.decode).toEqual(batch.slice(0, 2));
    expect(s.queued()).toEqual([live[2], batch[2], batch[3], batch[4]]);
    prefilled(...live.slice(0, 2));
    s.remove(batch[0] as Sequence); // a seat frees: the interactive one takes it
    expect(s.schedule()).toEqual({
      prefill: [live[2]],
      decode: [batch[1], live[0], live[1]],
      preempted: [],
    });
  });

  it("batch lines leave reserved seats empty; an interactive sequence takes one without a preemption", () => {
    const s = new Scheduler({ maxNumSeqs: 4, maxBatchedTokens: 100, batchReservedSeats: 1 });
    const batch = [1, 2, 3, 4, 5].map((id) => seq(id, 3, undefined, 1));
    for (const b of batch) s.add(b);
    expect(s.admit()).toEqual(batch.slice(0, 3)); // nobody else waits, yet one seat stays free
    prefilled(...batch.slice(0, 3));
    expect(s.admit()).toEqual([]);
    const live = seq(6, 3);
    s.add(live);
    // mid-step (no preemption possible): seated at once all the same
    expect(s.admit()).toEqual([live]);
    expect(s.preempt()).toEqual([]);
    // a reserve never shuts batches out: at most every seat but one
    const tight = new Scheduler({ maxNumSeqs: 2, maxBatchedTokens: 100, batchReservedSeats: 5 });
    tight.add(seq(7, 3, undefined, 1));
    tight.add(seq(8, 3, undefined, 1));
    expect(tight.admit()).toHaveLength(1);
  });

  it("a batch line whose prefill is in flight is not preempted; a share of 1 never yields", () => {
    const s = new Scheduler({ maxNumSeqs: 2, maxBatchedTokens: 100, batchSeatShare: 0 });
    const [a, b] = [seq(1, 3, undefined, 1), seq(2, 3, undefined, 1)];
    s.add(a);
    s.add(b);
    s.schedule();
    prefilled(a);
    s.add(seq(3, 3));
    expect(s.schedule().preempted).toEqual([a]); // b's prompt is still running
    const whole = new Scheduler({ maxNumSeqs: 1, maxBatchedTokens: 100, batchSeatShare: 1 });
    const c = seq(4, 3, undefined, 1);
    whole.add(c);
    whole.schedule();
    prefilled(c);
    whole.add(seq(5, 3));
    expect(whole.schedule()).toEqual({ prefill: [], decode: [c], preempted: [] });
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
    expect(s.schedule()).toEqual({ prefill: [a, b], decode: [], preempted: [] });
    prefilled(a, b);
    s.add(c);
    expect(s.schedule()).toEqual({ prefill: [], decode: [a, b], preempted: [] }); // c waits for the batch to end
    s.remove(a);
    s.remove(b);
    const old = seq(4, 3, performance.now() - 5_000);
    s.remove(c);
    s.add(old);
    expect(s.schedule().prefill).toEqual([old]); // waited long enough to go alone
  });
});
