import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { createRedis, deletePrefix } from "./connection.js";
import { EventWriter } from "./event-log.js";
import { Keys } from "./keys.js";

// Real Redis (never mocked), under a prefix of this file's own.
const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const keys = new Keys(`ferry-test-${randomBytes(4).toString("hex")}`);
const redis = createRedis(url);
afterAll(async () => {
  redis.disconnect();
  await deletePrefix(url, keys.prefix);
});

const job = (id: string) => ({ queue: "q", id });
const read = async (id: string) =>
  (await redis.xrange(keys.events(job(id)), "-", "+")).map(([, f]) => JSON.parse(f[1] ?? "{}"));

describe("EventWriter", () => {
  it("appends events in order, and only while the writer still holds the job's lock", async () => {
    const writer = new EventWriter(redis, keys, 60);
    const lockKey = `${keys.prefix}:{q}:job-1:lock`;
    await redis.set(lockKey, "token-a");
    writer.emit(
      job("job-1"),
      [
        { type: "status", status: "running" },
        { type: "token", text: "a", index: 0 },
      ],
      { lockKey, token: "token-a" },
    );
    await writer.flush();
    // the job stalled over to another worker, which holds the lock now
    await redis.set(lockKey, "token-b");
    writer.emit(job("job-1"), [{ type: "token", text: "stale", index: 0 }], {
      lockKey,
      token: "token-a",
    });
    writer.emit(job("job-2"), [{ type: "done" }]); // unfenced writes (the API's) always land
    await writer.flush();
    expect(await read("job-1")).toEqual([
      { type: "status", status: "running" },
      { type: "token", text: "a", index: 0 },
    ]);
    expect(await read("job-2")).toEqual([{ type: "done" }]);
    expect(await redis.ttl(keys.events(job("job-1")))).toBeGreaterThan(0);
  });

  it("an append the client sends again after Redis applied it (a reply lost in a failover) lands once", async () => {
    const resending = createRedis(url);
    const writer = new EventWriter(resending, keys, 60);
    // the connection sends every append twice, as ioredis resends a command whose reply was lost
    const target = resending as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const once = target.ferryAppendEvents?.bind(resending);
    target.ferryAppendEvents = async (...args) => {
      await once?.(...args);
      return once?.(...args);
    };
    writer.emit(job("job-3"), [{ type: "token", text: "a", index: 0 }]);
    await writer.flush();
    writer.emit(job("job-3"), [{ type: "token", text: "b", index: 1 }]);
    await writer.flush();
    resending.disconnect();
    expect(await read("job-3")).toEqual([
      { type: "token", text: "a", index: 0 },
      { type: "token", text: "b", index: 1 },
    ]);
  });
});
