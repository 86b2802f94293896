import { describe, expect, it } from "vitest";
import { QueueDepth } from "./queue-depth.js";

/** A queue whose length is `waiting`, and a clock the test moves. */
function setup(waiting: number, budgetMs: number) {
  let now = 1_000_000;
  const counter = { waiting: async () => waiting, counts: async () => ({ waiting }) };
  const depth = new QueueDepth(counter, { waitBudgetMs: budgetMs }, () => now);
  const advance = (ms: number) => {
    now += ms;
  };
  return {
    depth,
    advance,
    now: () => now,
    /** `n` rows answered `everyMs` apart while others kept waiting (a backlog). */
    underLoad: (n: number, everyMs: number) => {
      depth.enter("m.v1");
      for (let i = 0; i < n; i++) {
        depth.served("m.v1");
        advance(everyMs);
      }
      depth.leave("m.v1");
    },
    /** `n` rows `everyMs` apart, each answered before the next was sent (the workers kept up). */
    oneByOne: (n: number, everyMs: number) => {
      for (let i = 0; i < n; i++) {
        depth.enter("m.v1");
        depth.served("m.v1");
        depth.leave("m.v1");
        advance(everyMs);
      }
    },
  };
}

describe("QueueDepth.admitRow", () => {
  it("never refuses by expected wait before a service rate is known (cold start, scale from zero)", () => {
    const { depth, now } = setup(0, 10);
    for (let i = 0; i < 50; i++) depth.enter("m.v1");
    expect(() => depth.admitRow("m.v1", 1_000, now() + 30_000)).not.toThrow();
  });

  it("refuses at once, by the depth over the measured rate, past the budget or the deadline", () => {
    const { depth, now, underLoad } = setup(0, 1_000);
    // 101 rows answered over one second: 101 rows/s
    underLoad(101, 10);
    for (let i = 0; i < 50; i++) depth.enter("m.v1"); // 0.5 s of work ahead
    expect(() => depth.admitRow("m.v1", 1_000, now() + 30_000)).not.toThrow();
    // but not for a row that can only wait 200 ms
    expect(() => depth.admitRow("m.v1", 1_000, now() + 200)).toThrow(
      /would take about 49\d ms to reach this request \(50 ahead at 101 rows\/s\); it can wait 200 ms/,
    );
    for (let i = 0; i < 100; i++) depth.enter("m.v1"); // 1.5 s ahead: past the 1 s budget
    let refusal: unknown;
    try {
      depth.admitRow("m.v1", 1_000, now() + 30_000);
    } catch (err) {
      refusal = err;
    }
    expect(refusal).toMatchObject({ code: "QUEUE_FULL", retryAfterS: 2 });
  });

  it("forgets a rate it has not refreshed for seconds: workers may have come or gone", () => {
    const { depth, advance, now, underLoad } = setup(0, 100);
    underLoad(101, 10);
    for (let i = 0; i < 50; i++) depth.enter("m.v1");
    expect(() => depth.admitRow("m.v1", 1_000, now() + 30_000)).toThrow();
    advance(6_000);
    expect(() => depth.admitRow("m.v1", 1_000, now() + 30_000)).not.toThrow();
  });

  it("measures nothing of the workers' pace across a stall (workers gone, then back)", () => {
    const { depth, advance, now, underLoad } = setup(0, 1_000);
    for (let i = 0; i < 50; i++) depth.enter("m.v1"); // a backlog throughout
    underLoad(101, 10); // ~100 rows/s
    // the workers go away with the rows waiting, and come back 6 s later...
    advance(6_000);
    // ...and answer a first row: with the stall in its window it would have measured ~0.2 rows/s
    depth.served("m.v1");
    advance(10);
    // 50 rows ahead: no rate is known now, so none is refused for the wait
    expect(() => depth.admitRow("m.v1", 1_000, now() + 30_000)).not.toThrow();
    // a second of service after it measures again
    underLoad(101, 10);
    for (let i = 0; i < 100; i++) depth.enter("m.v1"); // 1.5 s ahead
    expect(() => depth.admitRow("m.v1", 1_000, now() + 30_000)).toThrow(
      /150 ahead at 10\d rows\/s/,
    );
  });

  it("measures no rate from rows answered as fast as callers sent them (idle workers, then a burst)", () => {
    const { depth, now, oneByOne } = setup(0, 5_000);
    // two requests a second, each answered before the next is sent
    oneByOne(4, 500);
    // a burst: at "2 rows/s" 800 rows ahead would be 400 s; the workers' pace is unknown
    for (let i = 0; i < 800; i++) depth.enter("m.v1");
    expect(() => depth.admitRow("m.v1", 2_000, now() + 30_000)).not.toThrow();
  });

  it("lets a window in which the workers caught up raise a rate measured under load, never lower it", () => {
    const { depth, now, underLoad, oneByOne } = setup(0, 1_000);
    // under load: rows outstanding the whole second, ~100 a second answered
    underLoad(101, 10);
    const ahead = (n: number) => {
      for (let i = 0; i < n; i++) depth.enter("m.v1");
      const refused = (() => {
        try {
          depth.admitRow("m.v1", 10_000, now() + 30_000);
          return false;
        } catch {
          return true;
        }
      })();
      for (let i = 0; i < n; i++) depth.leave("m.v1");
      return refused;
    };
    expect(ahead(80)).toBe(false); // 0.8 s at ~100 rows/s
    expect(ahead(150)).toBe(true); // 1.5 s
    // a lighter second (the workers caught up between rows): 20 rows/s says nothing lower
    oneByOne(21, 50);
    expect(ahead(80)).toBe(false);
    expect(ahead(150)).toBe(true);
    // a second of 300 rows in which they still caught up: at least that fast
    oneByOne(301, 1000 / 300);
    expect(ahead(150)).toBe(false); // 0.5 s at ~300 rows/s
  });

  it("refuses past max_queue_size without waiting for Redis", () => {
    const { depth, now } = setup(0, 60_000);
    for (let i = 0; i < 10; i++) depth.enter("m.v1");
    expect(() => depth.admitRow("m.v1", 10, now() + 30_000)).toThrow(
      /is full \(10 waiting, limit 10\)/,
    );
  });
});

describe("QueueDepth.admit, the lowest band", () => {
  it("batch lines fill only their share of the queue; interactive requests get the rest", async () => {
    const counter = { waiting: async () => 0, counts: async () => ({ waiting: 0 }) };
    const depth = new QueueDepth(counter, { waitBudgetMs: 5_000, lowestBandShare: 0.5 });
    for (let i = 0; i < 5; i++) await depth.admit("m.v1", 10, { counted: true, lowest: true });
    await expect(depth.admit("m.v1", 10, { counted: true, lowest: true })).rejects.toMatchObject({
      code: "QUEUE_FULL",
      message: expect.stringMatching(
        /priority 1-3 \(batch lines among them\) is queued only while fewer than 5 of its 10 wait/,
      ),
    });
    for (let i = 0; i < 5; i++) await depth.admit("m.v1", 10, { counted: true });
    await expect(depth.admit("m.v1", 10, { counted: true })).rejects.toMatchObject({
      code: "QUEUE_FULL",
      message: expect.stringMatching(/is full \(10 waiting, limit 10\)/),
    });
  });
});

describe("QueueDepth.admit, several jobs together", () => {
  it("admits a request's choices all or none; more than the queue holds is the request's fault", async () => {
    const counter = { waiting: async () => 0, counts: async () => ({ waiting: 0 }) };
    const depth = new QueueDepth(counter, { waitBudgetMs: 5_000 });
    const first = await depth.admit("m.v1", 10, { counted: true, jobs: 4 });
    await depth.admit("m.v1", 10, { counted: true, jobs: 4 });
    await expect(depth.admit("m.v1", 10, { counted: true, jobs: 4 })).rejects.toMatchObject({
      code: "QUEUE_FULL",
      message: expect.stringMatching(
        /has no room for this request's 4 choices \(8 waiting, limit 10\)/,
      ),
    });
    // the refused request took no place: two single jobs still fit, then none
    await depth.admit("m.v1", 10, { counted: true });
    await depth.admit("m.v1", 10, { counted: true });
    await expect(depth.admit("m.v1", 10, { counted: true })).rejects.toMatchObject({
      code: "QUEUE_FULL",
    });
    // withdrawn together (refused after all by its key's share): their places are free again
    depth.withdraw("m.v1", first);
    await depth.admit("m.v1", 10, { counted: true, jobs: 4 });
    await expect(depth.admit("m.v1", 10, { counted: true, jobs: 11 })).rejects.toMatchObject({
      code: "INVALID_INPUT",
      message: expect.stringMatching(/11 choices are more than the queue for m.v1 holds \(10\)/),
    });
  });
});

describe("QueueDepth.admit, jobs on their way to Redis", () => {
  it("counts a job admitted before a count and stored after it until a count has it", async () => {
    let now = 1_000_000;
    // nothing admitted has reached the queue yet: every count reads 0
    const counter = { waiting: async () => 0, counts: async () => ({ waiting: 0 }) };
    const depth = new QueueDepth(counter, { waitBudgetMs: 5_000 }, () => now);
    await depth.admit("m.v1", 2, { counted: true });
    // a count older than a second is read again before deciding: asked after a's admission,
    // without a in it
    now += 1_500;
    await depth.admit("m.v1", 2, { counted: true });
    // a and b both count (a had been dropped with that count: a third was taken past 2)
    await expect(depth.admit("m.v1", 2, { counted: true })).rejects.toMatchObject({
      code: "QUEUE_FULL",
    });
  });

  it("drops a stored job with the first count asked for after it landed, and one never said to land after 30 s", async () => {
    let now = 1_000_000;
    let waiting = 0;
    const counter = { waiting: async () => waiting, counts: async () => ({ waiting }) };
    const depth = new QueueDepth(counter, { waitBudgetMs: 5_000 }, () => now);
    const [a] = await depth.admit("m.v1", 2, { counted: true });
    await depth.admit("m.v1", 2, { counted: true });
    // a is stored, and the queue holds it; b's add is on its way
    depth.landed(a ? [a] : []);
    waiting = 1;
    now += 1_500;
    // the count (1: a) has a, not b: one place left, not none, and not two
    await expect(depth.admit("m.v1", 3, { counted: true })).resolves.toHaveLength(1);
    await expect(depth.admit("m.v1", 3, { counted: true })).rejects.toMatchObject({
      code: "QUEUE_FULL",
    });
    // b and c never land nor are withdrawn (their caller lost track): 30 s on, they count no more
    now += 31_000;
    await expect(depth.admit("m.v1", 3, { counted: true })).resolves.toHaveLength(1);
  });
});

describe("QueueDepth.admit after a quiet spell", () => {
  it("reads the queue again rather than refuse on a full count a moment old that nobody is reading again", async () => {
    let waiting = 10;
    let now = 1_000_000;
    // a count comes back a round trip later, as Redis's does
    const later = () => new Promise((r) => setTimeout(r, 5));
    const counter = {
      waiting: async () => {
        await later();
        return waiting;
      },
      counts: async () => ({ waiting }),
    };
    const depth = new QueueDepth(counter, { waitBudgetMs: 5_000 }, () => now);
    await expect(depth.admit("m.v1", 10)).rejects.toMatchObject({ code: "QUEUE_FULL" });
    // its jobs ran meanwhile; 300 ms on, the count read then said full
    waiting = 0;
    now += 300;
    await depth.admit("m.v1", 10);
  });

  it("reads the queue again rather than refuse on a count a second old", async () => {
    let waiting = 10;
    let now = 1_000_000;
    const counter = { waiting: async () => waiting, counts: async () => ({ waiting }) };
    const depth = new QueueDepth(counter, { waitBudgetMs: 5_000 }, () => now);
    await expect(depth.admit("m.v1", 10)).rejects.toMatchObject({ code: "QUEUE_FULL" });
    // (the refresh the refusal started lands)
    await new Promise((r) => setTimeout(r, 0));
    await expect(depth.admit("m.v1", 10)).rejects.toMatchObject({ code: "QUEUE_FULL" });
    waiting = 0;
    now += 2_000;
    await depth.admit("m.v1", 10);
  });
});

describe("QueueDepth.admitRow after a quiet spell", () => {
  it("does not refuse a sync row on a count a second old that nobody reads again", async () => {
    let waiting = 10;
    let now = 1_000_000;
    const counter = { waiting: async () => waiting, counts: async () => ({ waiting }) };
    const depth = new QueueDepth(counter, { waitBudgetMs: 5_000 }, () => now);
    depth.admitRow("m.v1", 10, now + 30_000);
    await new Promise((r) => setTimeout(r, 0));
    now += 200;
    expect(() => depth.admitRow("m.v1", 10, now + 30_000)).toThrow(/is full/);
    await new Promise((r) => setTimeout(r, 0));
    waiting = 0;
    now += 2_000;
    expect(() => depth.admitRow("m.v1", 10, now + 30_000)).not.toThrow();
  });
});
