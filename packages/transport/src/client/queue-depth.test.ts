import { describe, expect, it } from "vitest";
import { QueueDepth } from "./queue-depth.js";

/** A queue whose length is `waiting`, and a clock the test moves. */
function setup(waiting: number, budgetMs: number) {
  let now = 1_000_000;
  const counter = { waiting: async () => waiting, counts: async () => ({ waiting }) };
  const depth = new QueueDepth(counter, { waitBudgetMs: budgetMs }, () => now);
  return {
    depth,
    advance: (ms: number) => {
      now += ms;
    },
    now: () => now,
  };
}

describe("QueueDepth.admitRow", () => {
  it("never refuses by expected wait before a service rate is known (cold start, scale from zero)", () => {
    const { depth, now } = setup(0, 10);
    for (let i = 0; i < 50; i++) depth.enter("m.v1");
    expect(() => depth.admitRow("m.v1", 1_000, now() + 30_000)).not.toThrow();
  });

  it("refuses at once, by the depth over the measured rate, past the budget or the deadline", () => {
    const { depth, advance, now } = setup(0, 1_000);
    // 100 rows answered over one second: 100 rows/s
    for (let i = 0; i < 100; i++) {
      depth.served("m.v1");
      advance(10);
    }
    depth.served("m.v1");
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
    const { depth, advance, now } = setup(0, 100);
    for (let i = 0; i < 101; i++) {
      depth.served("m.v1");
      advance(10);
    }
    for (let i = 0; i < 50; i++) depth.enter("m.v1");
    expect(() => depth.admitRow("m.v1", 1_000, now() + 30_000)).toThrow();
    advance(6_000);
    expect(() => depth.admitRow("m.v1", 1_000, now() + 30_000)).not.toThrow();
  });

  it("refuses past max_queue_size without waiting for Redis", () => {
    const { depth, now } = setup(0, 60_000);
    for (let i = 0; i < 10; i++) depth.enter("m.v1");
    expect(() => depth.admitRow("m.v1", 10, now() + 30_000)).toThrow(
      /is full \(10 waiting, limit 10\)/,
    );
  });
});
