// Both sides of the sync lane together: the producer the API uses and the consumer a worker runs.
import { randomBytes } from "node:crypto";
import {
  type InferJob,
  type InferReply,
  type InferRow,
  type RowResult,
  WIRE_VERSION,
} from "@ferry/protocol";
import { afterAll, describe, expect, it } from "vitest";
import { SyncLaneProducer } from "./client/sync-lane-producer.js";
import { createRedis, deletePrefix } from "./shared/connection.js";
import { Keys } from "./shared/keys.js";
import { SYNC_GROUP } from "./shared/sync-lane.js";
import type { RowHandler } from "./worker/handlers.js";
import { SyncLaneConsumer } from "./worker/sync-lane-consumer.js";

// Real Redis (never mocked), under a prefix of this file's own.
const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const keys = new Keys(`ferry-test-${randomBytes(4).toString("hex")}`);
const QUEUE = { name: "m.v1", model: "m", version: "1" };
const opened: Array<{ disconnect(): void }> = [];
const connect = () => {
  const redis = createRedis(url);
  opened.push(redis);
  return redis;
};
const redis = connect();
const producer = new SyncLaneProducer(redis, keys);
afterAll(async () => {
  for (const r of opened) r.disconnect();
  await deletePrefix(url, keys.prefix);
});

/** Collects every row answer published on `channel`. */
async function listen(channel: string): Promise<Map<string, RowResult[]>> {
  const answers = new Map<string, RowResult[]>();
  const sub = connect();
  sub.on("smessage", (_c: string, message: string) => {
    for (const r of (JSON.parse(message) as InferReply).results)
      answers.set(r.rid, [...(answers.get(r.rid) ?? []), r]);
  });
  await sub.ssubscribe(channel);
  return answers;
}

function group(rids: string[], replyTo: string): InferJob {
  return {
    v: WIRE_VERSION,
    kind: "infer",
    model: QUEUE.model,
    version: QUEUE.version,
    rows: rids.map((rid) => ({ rid, inputs: {}, deadline: Date.now() + 60_000 })),
    reply_to: replyTo,
    accepted_at: Date.now(),
  };
}

// Locks of 1.5 s renewed every 100 ms: a loaded machine would have to stall a timer for most
// of the lock to make a renewal late.
function consumer(name: string, handler: RowHandler, lockDurationMs = 1_500, goneAfterMs?: number) {
  const c = new SyncLaneConsumer(
    connect(),
    connect(),
    keys,
    QUEUE,
    name,
    {
      capacity: 8,
      lockDurationMs,
      stalledIntervalMs: 100,
      maxDeliveries: 3,
      ...(goneAfterMs === undefined ? {} : { goneAfterMs }),
    },
    handler,
  );
  c.start();
  return c;
}

const ok = (row: InferRow): RowResult => ({
  rid: row.rid,
  ok: true,
  outputs: {},
  timing: { queue_ms: 0, compute_ms: 0, batch_size: 1 },
});
/** The band priority 5 goes to, where every test sends. */
const LANE = keys.syncLane(QUEUE.name, 1);
const stand = connect();

/**
 * A stand-in worker named `name` reads the next group (and then, say, dies holding it):
 * returns the group's id.
 */
async function deliverTo(name: string): Promise<string> {
  await stand.xgroup("CREATE", LANE, SYNC_GROUP, "0", "MKSTREAM").catch(() => undefined);
  const got = (await stand.xreadgroup(
    "GROUP",
    SYNC_GROUP,
    name,
    "COUNT",
    1,
    "STREAMS",
    LANE,
    ">",
  )) as Array<[string, Array<[string, string[]]>]> | null;
  return got?.[0]?.[1][0]?.[0] ?? "";
}

/** Takes a group out of the lane, as an answered one would be. */
async function forget(id: string): Promise<void> {
  await stand.xack(LANE, SYNC_GROUP, id);
  await stand.xdel(LANE, id);
}

const until = async (check: () => boolean, ms = 10_000) => {
  const end = Date.now() + ms;
  while (!check() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  return check();
};

describe("SyncLaneConsumer", () => {
  it("answers a group's rows in one reply, then acknowledges and deletes it", async () => {
    const channel = `${keys.prefix}:reply:a`;
    const answers = await listen(channel);
    const c = consumer("w-a", async (row) => ok(row));
    await producer.send(QUEUE.name, 5, group(["a1", "a2", "a3"], channel));
    expect(await until(() => answers.size === 3)).toBe(true);
    await c.close();
    expect(await producer.backlog(QUEUE.name)).toEqual({ waiting: 0, active: 0 });
  });

  it("a group whose worker died is claimed by another once its lock lapses, and answered", async () => {
    const channel = `${keys.prefix}:reply:b`;
    const answers = await listen(channel);
    await producer.send(QUEUE.name, 5, group(["b1"], channel));
    // a worker that reads the group and never answers: it died holding it
    await deliverTo("w-dead");
    expect(await producer.backlog(QUEUE.name)).toEqual({ waiting: 0, active: 1 });
    const started = Date.now();
    const c = consumer("w-b", async (row) => ok(row));
    expect(await until(() => answers.has("b1"))).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_400); // not before the lock lapsed
    expect(answers.get("b1")?.[0]?.ok).toBe(true);
    await c.close();
  });

  it("a worker renews what it holds: a slow row is never claimed and computed twice", async () => {
    const channel = `${keys.prefix}:reply:c`;
    const answers = await listen(channel);
    let computed = 0;
    const slow = consumer("w-slow", async (row) => {
      computed++;
      await new Promise((r) => setTimeout(r, 4_000)); // well past the 1.5 s lock
      return ok(row);
    });
    await producer.send(QUEUE.name, 5, group(["c1"], channel));
    await until(() => computed === 1);
    const other = consumer("w-other", async (row) => {
      computed++;
      return ok(row);
    });
    expect(await until(() => answers.has("c1"))).toBe(true);
    expect(computed).toBe(1);
    expect(answers.get("c1")).toHaveLength(1);
    await Promise.all([slow.close(), other.close()]);
  });

  it("forgets the consumers of workers long gone that hold nothing, keeps those that do", async () => {
    await stand.xgroup("CREATECONSUMER", LANE, SYNC_GROUP, "w-gone");
    await producer.send(QUEUE.name, 5, group(["e1"], `${keys.prefix}:reply:e`));
    const heldId = await deliverTo("w-holding");
    await new Promise((r) => setTimeout(r, 300));
    const names = async () =>
      ((await stand.xinfo("CONSUMERS", LANE, SYNC_GROUP)) as string[][]).map((f) => f[1]);
    expect(await names()).toEqual(expect.arrayContaining(["w-gone", "w-holding"]));
    // lock far away: nothing is claimed, so "w-holding" keeps holding its group
    const c = consumer("w-e", async (row) => ok(row), 60_000, 200);
    expect(await until(() => false, 600)).toBe(false); // a few maintenance rounds
    const left = await names();
    expect(left).not.toContain("w-gone");
    expect(left).toContain("w-holding");
    await c.close();
    await forget(heldId);
  });

  it("a closing worker never leaves the group while it still holds something (it would be lost)", async () => {
    await producer.send(QUEUE.name, 5, group(["f1"], `${keys.prefix}:reply:f`));
    // delivered to "w-f" but never seen by it: a read cut mid-reply at a shutdown
    const id = await deliverTo("w-f");
    const c = consumer("w-f", async (row) => ok(row), 60_000);
    await new Promise((r) => setTimeout(r, 200));
    await c.close();
    // still pending, so another worker can claim it
    const pending = (await stand.xpending(LANE, SYNC_GROUP)) as [number, ...unknown[]];
    expect(Number(pending[0])).toBe(1);
    await forget(id);
  });

  it("sends what it answered in the turn it read it before it writes its next read", async () => {
    const channel = `${keys.prefix}:reply:o`;
    const answers = await listen(channel);
    // the order in which the worker gives its two connections their commands
    const issued: string[] = [];
    const reader = connect();
    const writer = connect();
    const read = reader.xreadgroup.bind(reader) as (...args: unknown[]) => Promise<unknown>;
    Object.assign(reader, {
      xreadgroup: (...args: unknown[]) => {
        issued.push("read");
        return read(...args).then((reply) => {
          if (reply) issued.push("got");
          return reply;
        });
      },
    });
    const publish = writer.spublish.bind(writer) as (...args: unknown[]) => Promise<unknown>;
    Object.assign(writer, {
      spublish: (...args: unknown[]) => {
        issued.push("answer");
        return publish(...args);
      },
    });
    const options = {
      capacity: 8,
      lockDurationMs: 1_500,
      stalledIntervalMs: 100,
      maxDeliveries: 3,
    };
    // answered in the turn it is read, as an inline model's batch is
    const c = new SyncLaneConsumer(reader, writer, keys, QUEUE, "w-o", options, async (row) =>
      ok(row),
    );
    c.start();
    await until(() => issued.includes("read"));
    await producer.send(QUEUE.name, 5, group(["o1"], channel));
    expect(await until(() => answers.has("o1"))).toBe(true);
    await until(() => issued.filter((e) => e === "read").length >= 2);
    const got = issued.indexOf("got");
    expect(issued.slice(got, got + 3)).toEqual(["got", "answer", "read"]);
    await c.close();
  });

  it("a group its workers keep dying on is answered with an error, not tried forever", async () => {
    const channel = `${keys.prefix}:reply:d`;
    const answers = await listen(channel);
    await producer.send(QUEUE.name, 5, group(["d1"], channel));
    // three workers read it and died; the fourth delivery is one too many
    const id = await deliverTo("w-dead-1");
    for (const name of ["w-dead-2", "w-dead-3"]) await stand.xclaim(LANE, SYNC_GROUP, name, 0, id);
    let computed = 0;
    const c = consumer("w-d", async (row) => {
      computed++;
      return ok(row);
    });
    expect(await until(() => answers.has("d1"))).toBe(true);
    const [answer] = answers.get("d1") ?? [];
    expect(answer?.ok).toBe(false);
    expect(answer && !answer.ok ? answer.error.code : "").toBe("MODEL_ERROR");
    expect(computed).toBe(0);
    await c.close();
  });
});

describe("SyncLaneProducer.sendLooking (a cached model's lookup and enqueue, one script)", () => {
  const stored = (at: number, prediction: number) => `${at}:{"prediction":${prediction}}`;

  it("answers the rows the cache holds fresh and queues only the rest, as one valid entry", async () => {
    const q = { ...QUEUE, name: "looked.v1" };
    const [current, previous] = [keys.cacheBucket(q.name, 2), keys.cacheBucket(q.name, 1)];
    const now = Date.now();
    await redis.hset(current, "fresh-now", stored(now, 1));
    await redis.hset(previous, "fresh-before", stored(now - 1_000, 2));
    await redis.hset(current, "stale", stored(now - 60_000, 3));
    const job = group(["a", "b", "c", "d", "e"], "reply-looked");
    // rows are cut out of the entry by byte length: characters of several bytes must not shift them
    for (const row of job.rows) row.inputs = { text: `naïve ✓ ${row.rid}` };
    const hits = await producer.sendLooking(q.name, 5, job, {
      buckets: [current, previous],
      cutoff: now - 10_000,
      // "" asks nothing of the cache (that request said no-cache)
      fields: ["fresh-now", "never-stored", "fresh-before", "stale", ""],
    });
    expect(hits).toEqual([stored(now, 1), undefined, stored(now - 1_000, 2), undefined, undefined]);
    const entries = (await redis.xrange(keys.syncLane(q.name, 1), "-", "+")) as Array<
      [string, string[]]
    >;
    expect(entries).toHaveLength(1);
    const queued = JSON.parse(entries[0]?.[1][1] ?? "") as InferJob;
    expect(queued).toEqual({ ...job, rows: [job.rows[1], job.rows[3], job.rows[4]] });
  });

  it("queues nothing when every row hit", async () => {
    const q = { ...QUEUE, name: "all-hit.v1" };
    const bucket = keys.cacheBucket(q.name, 7);
    const at = Date.now();
    await redis.hset(bucket, "x", stored(at, 4));
    const hits = await producer.sendLooking(q.name, 5, group(["x1"], "reply-all-hit"), {
      buckets: [bucket, keys.cacheBucket(q.name, 6)],
      cutoff: 0,
      fields: ["x"],
    });
    expect(hits).toEqual([stored(at, 4)]);
    expect(await redis.exists(keys.syncLane(q.name, 1))).toBe(0);
  });
});
