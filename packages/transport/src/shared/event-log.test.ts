import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { type OwnRedis, ownRedis } from "../../../../test/helpers/own-redis.js";
import { createRedis, deletePrefix, type RedisClient } from "./connection.js";
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
const read = async (id: string, conn = redis) =>
  (await conn.xrange(keys.events(job(id)), "-", "+")).map(([, f]) => JSON.parse(f[1] ?? "{}"));

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
      { lockKey, token: "token-a", attempt: "1" },
    );
    await writer.flush();
    // the job stalled over to another worker, which holds the lock now
    await redis.set(lockKey, "token-b");
    writer.emit(job("job-1"), [{ type: "token", text: "stale", index: 0 }], {
      lockKey,
      token: "token-a",
      attempt: "1",
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

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("EventWriter when Redis goes away mid-job", () => {
  it("sends a failed append again until it lands: the log keeps every event, in order, once", async () => {
    await onOwnRedis(async (server, conn) => {
      const writer = new EventWriter(conn, keys, 60, { retryForMs: 20_000 });
      const token = (text: string, index: number) => ({ type: "token" as const, text, index });
      writer.emit(job("job-4"), [{ type: "status", status: "running" }, token("a", 0)]);
      await writer.flush();
      await server.kill();
      writer.emit(job("job-4"), [token("b", 1)]);
      await sleep(20); // its append has failed and waits to be sent again
      writer.emit(job("job-4"), [token("c", 2), { type: "done" }]);
      const flushed = writer.flush(job("job-4"));
      await sleep(500);
      await server.start();
      await flushed;
      expect(await read("job-4", conn)).toEqual([
        { type: "status", status: "running" },
        token("a", 0),
        token("b", 1),
        token("c", 2),
        { type: "done" },
      ]);
    });
  });

  it("a writer that does not retry (the API's) rejects at once, and a later write of the job lands", async () => {
    await onOwnRedis(async (server, conn) => {
      const writer = new EventWriter(conn, keys, 60);
      await server.kill();
      writer.emit(job("job-5"), [{ type: "status", status: "queued" }]);
      await expect(writer.flush(job("job-5"))).rejects.toThrow();
      await server.start();
      await waitReady(conn);
      // the caller was told (a 503), and its next try (a cancel, say) is written
      writer.emit(job("job-5"), [{ type: "done" }]);
      await writer.flush(job("job-5"));
      await writer.flush();
      expect(await read("job-5", conn)).toEqual([{ type: "done" }]);
    });
  });

  it("a worker's attempt whose append gave up writes nothing more: its log never has a hole", async () => {
    await onOwnRedis(async (server, conn) => {
      const writer = new EventWriter(conn, keys, 60, { retryForMs: 300 });
      const lockKey = `${keys.prefix}:{q}:job-6:lock`;
      const fence = { lockKey, token: "token-a", attempt: "1" };
      await conn.set(lockKey, "token-a");
      writer.emit(job("job-6"), [{ type: "token", text: "a", index: 0 }], fence);
      await writer.flush(job("job-6"), fence);
      await server.kill();
      writer.emit(job("job-6"), [{ type: "token", text: "b", index: 1 }], fence);
      await expect(writer.flush(job("job-6"), fence)).rejects.toThrow();
      await server.start();
      await waitReady(conn);
      writer.emit(job("job-6"), [{ type: "token", text: "c", index: 2 }], fence);
      await expect(writer.flush(job("job-6"), fence)).rejects.toThrow();
      await writer.flush(); // what is given up on does not hold up everyone else's flushes
      expect(await read("job-6", conn)).toEqual([{ type: "token", text: "a", index: 0 }]);
      // the job's next attempt writes again, even under the same token (BullMQ hands a
      // worker's next job the token of its last)
      const next = { lockKey, token: "token-a", attempt: "2" };
      writer.emit(job("job-6"), [{ type: "token", text: "b", index: 1 }], next);
      await writer.flush(job("job-6"), next);
      expect(await read("job-6", conn)).toHaveLength(2);
    });
  });
});

/**
 * Runs `test` against a redis-server of its own, over a connection with no offline queue and
 * no retries: while the server is down, every append fails at once.
 */
async function onOwnRedis(test: (server: OwnRedis, conn: RedisClient) => Promise<void>) {
  const server = await ownRedis();
  const conn = createRedis(server.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false });
  conn.on("error", () => {});
  await waitReady(conn);
  try {
    await test(server, conn);
  } finally {
    conn.disconnect();
    await server.stop();
  }
}

async function waitReady(conn: RedisClient): Promise<void> {
  for (let i = 0; i < 200 && conn.status !== "ready"; i++) await sleep(25);
}
