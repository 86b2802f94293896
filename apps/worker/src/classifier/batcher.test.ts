import type { FerryError } from "@ferry/protocol";
import { describe, expect, it } from "vitest";
import { Batcher, type BatcherOptions } from "./batcher.js";
import { FakeClock } from "./fake-clock.js";

/** An executor that records each batch and answers when the test says so. */
function recorder(fail?: (x: number) => boolean) {
  const batches: number[][] = [];
  const release: Array<() => void> = [];
  const execute = (inputs: number[]) => {
    batches.push(inputs);
    return new Promise<number[]>((resolve, reject) => {
      release.push(() => {
        if (fail && inputs.some(fail)) reject(new Error(`bad row in ${inputs.join(",")}`));
        else resolve(inputs.map((x) => x * 10));
      });
    });
  };
  return { batches, release, execute };
}

const flush = () => new Promise((r) => setImmediate(r));
const far = 1e12;

function setup(options: Partial<BatcherOptions<number>> = {}, fail?: (x: number) => boolean) {
  const clock = new FakeClock();
  const rec = recorder(fail);
  const batcher = new Batcher(
    rec.execute,
    { maxBatchSize: 4, preferredBatchSizes: [], maxQueueDelayMs: 10, ...options },
    clock,
  );
  return { clock, batcher, ...rec };
}

describe("Batcher", () => {
  it("flushes as soon as the batch is full, without waiting for the delay", async () => {
    const { batcher, batches, release } = setup();
    const results = [1, 2, 3, 4].map((x) => batcher.submit(x, far));
    expect(batches).toEqual([[1, 2, 3, 4]]);
    for (const r of release) r();
    const outs = await Promise.all(results);
    expect(outs.map((o) => o.output)).toEqual([10, 20, 30, 40]);
    expect(outs.every((o) => o.batchSize === 4)).toBe(true);
  });

  it("waits for the oldest row's max_queue_delay, then flushes what it has", async () => {
    const { batcher, batches, clock, release } = setup();
    const a = batcher.submit(1, far);
    clock.advance(6);
    const b = batcher.submit(2, far);
    clock.advance(3);
    expect(batches).toEqual([]);
    clock.advance(1); // the oldest has now waited 10 ms; the younger row rides along
    expect(batches).toEqual([[1, 2]]);
    for (const r of release) r();
    const [ra, rb] = await Promise.all([a, b]);
    expect(ra.queueMs).toBe(10);
    expect(rb.queueMs).toBe(4);
  });

  it("dispatches a preferred size at once and keeps the rest waiting", async () => {
    const { batcher, batches, clock } = setup({ maxBatchSize: 8, preferredBatchSizes: [2, 4] });
    for (const x of [1, 2, 3]) void batcher.submit(x, far);
    // 2 is preferred: the first two go at once; the third waits for its own delay
    expect(batches).toEqual([[1, 2]]);
    expect(batcher.pending).toBe(1);
    clock.advance(10);
    expect(batches).toEqual([[1, 2]]); // concurrency 1: the instance is still busy
  });

  it("gathers a larger batch while the only instance is busy", async () => {
    const { batcher, batches, release, clock } = setup({ maxBatchSize: 8, maxQueueDelayMs: 0 });
    void batcher.submit(1, far);
    expect(batches).toEqual([[1]]);
    for (const x of [2, 3, 4]) void batcher.submit(x, far);
    clock.advance(50);
    expect(batches.length).toBe(1);
    release[0]?.();
    await flush();
    expect(batches[1]).toEqual([2, 3, 4]);
  });

  it("runs `concurrency` batches side by side", () => {
    const { batcher, batches } = setup({ maxBatchSize: 2, maxQueueDelayMs: 10, concurrency: 2 });
    for (const x of [1, 2, 3, 4, 5]) void batcher.submit(x, far);
    expect(batches).toEqual([
      [1, 2],
      [3, 4],
    ]);
    expect(batcher.inFlight).toBe(2);
    expect(batcher.pending).toBe(1);
  });

  it("isolates a bad row: the batch is retried row by row and only that row fails", async () => {
    const { batcher, release, batches } = setup(
      { maxQueueDelayMs: 0, maxBatchSize: 3 },
      (x) => x === 2,
    );
    const results = [1, 2, 3].map((x) =>
      batcher.submit(x, far).then(
        (o) => o.output,
        (e: FerryError) => e.code,
      ),
    );
    // release the batch, then each single-row retry as it arrives
    for (let k = 0; k < 4; k++) {
      release[k]?.();
      await flush();
    }
    expect(batches).toEqual([[1], [2, 3], [2], [3]]);
    expect(await Promise.all(results)).toEqual([10, "MODEL_ERROR", 30]);
  });

  it("never computes a row whose deadline passed while it waited", async () => {
    const { batcher, batches, clock, release } = setup({ maxQueueDelayMs: 20 });
    const late = batcher.submit(1, 5).catch((e: FerryError) => e.code);
    const onTime = batcher.submit(2, far);
    clock.advance(20);
    expect(batches).toEqual([[2]]);
    release[0]?.();
    expect(await late).toBe("DEADLINE_EXCEEDED");
    expect((await onTime).output).toBe(20);
  });

  it("drops a cancelled row before compute", async () => {
    const { batcher, batches, clock } = setup();
    const controller = new AbortController();
    const cancelled = batcher.submit(1, far, controller.signal).catch((e: FerryError) => e.code);
    controller.abort();
    void batcher.submit(2, far);
    clock.advance(10);
    expect(batches).toEqual([[2]]);
    expect(await cancelled).toBe("CANCELLED");
  });

  it("looks at each waiting row once, as it is taken, not the whole queue at every submit", async () => {
    const { batcher, batches, clock, release } = setup({ maxBatchSize: 32 });
    let looks = 0;
    const watched = {
      get aborted() {
        looks++;
        return false;
      },
    } as AbortSignal;
    // a batch job's chunk: thousands of rows submitted at once while the instance is busy
    const rows = Array.from({ length: 2_000 }, (_, x) => batcher.submit(x, far, watched));
    expect(batches).toHaveLength(1);
    while (release.length > 0) {
      release.shift()?.();
      await flush();
      clock.advance(10);
    }
    await Promise.all(rows);
    expect(batches.flat()).toHaveLength(2_000);
    expect(looks).toBeLessThanOrEqual(2 * 2_000);
  });

  it("leaves no timer behind once the queue is empty", async () => {
    const { batcher, clock, release } = setup();
    const p = batcher.submit(1, far);
    clock.advance(10);
    release[0]?.();
    await p;
    await batcher.idle();
    expect(clock.pendingTimers).toBe(0);
  });
});

describe("Batcher with a token budget (TEI's max_batch_tokens)", () => {
  // each row is its own token count; a batch's cost is its rows times its longest row
  const budget = { maxBatchTokens: 100, tokensOf: (x: number) => x };

  it("closes a batch once one more row would pass the padded budget, before max_batch_size", async () => {
    const { batcher, batches, release, clock } = setup({ maxBatchSize: 8, tokenBudget: budget });
    const rows = [30, 30, 30].map((x) => batcher.submit(x, far));
    expect(batches).toEqual([]); // 3 x 30 = 90 fits: it waits for company
    rows.push(batcher.submit(30, far)); // 4 x 30 = 120 would not
    expect(batches).toEqual([[30, 30, 30]]);
    release.shift()?.();
    await flush();
    clock.advance(10);
    expect(batches).toEqual([[30, 30, 30], [30]]);
    release.shift()?.();
    expect((await Promise.all(rows)).map((o) => o.batchSize)).toEqual([3, 3, 3, 1]);
  });

  it("counts padding: short rows beside a long one cost the long one's length", () => {
    const { batcher, batches } = setup({ maxBatchSize: 8, tokenBudget: budget });
    for (const x of [10, 10, 60]) void batcher.submit(x, far);
    // 3 x 60 = 180: the short pair goes, the long row starts the next batch
    expect(batches).toEqual([[10, 10]]);
  });

  it("runs a row over the budget alone, never refused", async () => {
    const { batcher, batches, release, clock } = setup({ maxBatchSize: 8, tokenBudget: budget });
    const big = batcher.submit(150, far);
    const small = batcher.submit(5, far);
    expect(batches).toEqual([[150]]);
    release.shift()?.();
    await flush();
    clock.advance(10);
    expect(batches).toEqual([[150], [5]]);
    release.shift()?.();
    expect((await big).output).toBe(1500);
    expect((await small).output).toBe(50);
  });

  it("fills a batch past rows that left on the way (their deadline passed), within the budget", () => {
    const { batcher, batches, clock } = setup({ maxBatchSize: 8, tokenBudget: budget });
    void batcher.submit(40, far);
    batcher.submit(10, 5).catch(() => undefined);
    clock.advance(5);
    // 40, 10 and 40 would pad to 120: a batch closes at two rows, and the 10 is dead by now
    void batcher.submit(40, far);
    expect(batches).toEqual([[40, 40]]);
  });
});

describe("Batcher: whole batches beside live rows", () => {
  it("runs whole batches (an offline chunk's) in order, on instances live rows leave", async () => {
    const { batcher, batches, release } = setup({ concurrency: 1 });
    const ran: string[] = [];
    const gates: Array<() => void> = [];
    const whole = (name: string) =>
      batcher.runWhole(() => {
        ran.push(name);
        return new Promise<string>((resolve) => gates.push(() => resolve(name)));
      });
    const first = whole("chunk-a");
    const second = whole("chunk-b");
    await flush();
    expect(ran).toEqual(["chunk-a"]);
    // live rows arrive while a whole batch runs: they go next, before chunk-b
    const live = [1, 2, 3, 4].map((x) => batcher.submit(x, far));
    expect(batches).toEqual([]);
    gates.shift()?.();
    expect(await first).toBe("chunk-a");
    await flush();
    expect(batches).toEqual([[1, 2, 3, 4]]);
    expect(ran).toEqual(["chunk-a"]);
    release.shift()?.();
    await Promise.all(live);
    await flush();
    expect(ran).toEqual(["chunk-a", "chunk-b"]);
    let idle = false;
    void batcher.idle().then(() => {
      idle = true;
    });
    await flush();
    expect(idle).toBe(false);
    gates.shift()?.();
    expect(await second).toBe("chunk-b");
    await flush();
    expect(idle).toBe(true);
  });

  it("a live row waiting for its delay leaves the instance to a whole batch meanwhile", async () => {
    const { batcher, batches, clock, release } = setup({ concurrency: 1 });
    const row = batcher.submit(1, far);
    let ran = false;
    const whole = batcher.runWhole(async () => {
      ran = true;
      return "done";
    });
    await flush();
    expect(ran).toBe(true);
    expect(await whole).toBe("done");
    clock.advance(10);
    await flush();
    expect(batches).toEqual([[1]]);
    release.shift()?.();
    expect((await row).output).toBe(10);
  });

  it("a whole batch whose work throws at once rejects its caller and frees the instance", async () => {
    const { batcher } = setup({ concurrency: 1 });
    await expect(
      batcher.runWhole(() => {
        throw new Error("bad chunk");
      }),
    ).rejects.toThrow("bad chunk");
    expect(await batcher.runWhole(async () => "next")).toBe("next");
    await batcher.idle();
    expect(batcher.inFlight).toBe(0);
  });
});
