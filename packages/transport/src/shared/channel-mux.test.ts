import { once } from "node:events";
import { afterAll, describe, expect, it } from "vitest";
import { ChannelMux } from "./channel-mux.js";
import { createRedis } from "./connection.js";

// Real Redis (never mocked).
const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const subscriber = createRedis(url);
afterAll(() => subscriber.disconnect());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("ChannelMux.onResubscribed", () => {
  it("a burst of resubscriptions is told a few times, the last time after the last of them", async () => {
    const mux = new ChannelMux(subscriber);
    const told: number[] = [];
    mux.onResubscribed(() => told.push(performance.now()));
    if (subscriber.status !== "ready") await once(subscriber, "ready"); // the first: not a resubscription
    // as ioredis says it while a shard is down: every few ms, for a while
    let last = 0;
    for (let k = 0; k < 60; k++) {
      subscriber.emit("ready");
      last = performance.now();
      await sleep(5);
    }
    await sleep(600);
    expect(told.length).toBeGreaterThanOrEqual(1);
    expect(told.length).toBeLessThanOrEqual(4);
    expect(told.at(-1)).toBeGreaterThanOrEqual(last);
  });

  it("a listener added once the connection is up is told of the next resubscription", async () => {
    const mux = new ChannelMux(subscriber);
    if (subscriber.status !== "ready") await once(subscriber, "ready");
    const told: number[] = [];
    mux.onResubscribed(() => told.push(performance.now()));
    subscriber.emit("ready"); // a reconnection: the first this listener sees
    await sleep(1_000);
    expect(told).toHaveLength(1);
  });
});
