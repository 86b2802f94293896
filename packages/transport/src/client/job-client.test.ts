import type { JobEvent } from "@ferry/protocol";
import { Queue, Worker } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type OwnRedis, ownRedis } from "../../../../test/helpers/own-redis.js";
import { createRedis, type RedisClient } from "../shared/connection.js";
import type { JobRecord } from "../shared/job-records.js";
import { bullQueueName, Keys } from "../shared/keys.js";
import { InferenceClient } from "./inference-client.js";

// A redis-server of this file's own: the test changes its ACL, which the shared one must never see.
const prefix = "ferry-test-removals";
const keys = new Keys(prefix);
let server: OwnRedis;
let admin: RedisClient;
/** An API replica whose Redis user loses write access to event logs mid-test. */
let remover: InferenceClient;
/** Another replica, whose user keeps every right: it follows the logs and sweeps. */
let other: InferenceClient;

beforeAll(async () => {
  server = await ownRedis();
  admin = createRedis(server.url);
  await admin.acl("SETUSER", "api", "on", ">secret", "~*", "&*", "+@all");
  const port = new URL(server.url).port;
  remover = new InferenceClient({
    redisUrl: `redis://api:secret@127.0.0.1:${port}`,
    prefix,
    closeRetryMs: 200,
  });
  other = new InferenceClient({ redisUrl: server.url, prefix });
  await Promise.all([remover.ready(), other.ready()]);
});

afterAll(async () => {
  await Promise.all([remover?.close(), other?.close()]);
  admin?.disconnect();
  await server?.stop();
});

/** Every key of the prefix but the event logs (`<prefix>:events:...`): a node refusing those writes. */
const withoutEventLogs = () =>
  admin.acl("SETUSER", "api", "resetkeys", `~${prefix}:[^e]*`, `~${prefix}:e[^v]*`);
const withEverything = () => admin.acl("SETUSER", "api", "resetkeys", "~*");

/** A job queued on `model`'s version 1, its deadline a minute ahead (`keepS`: kept once it ends). */
async function queuedJob(model = "m", keepS?: number): Promise<JobRecord> {
  return remover.jobs.submit({
    model,
    version: "1",
    rows: [{ input: "AAAAAA==" }],
    deadline: Date.now() + 60_000,
    priority: 5,
    maxQueueSize: 100,
    owner: "",
    meta: {},
    ...(keepS === undefined ? {} : { keepS }),
  });
}

/** Collects a job's events as another replica's reader sees them, until `done`. */
function follow(record: JobRecord): { events: JobEvent["body"][]; ended: Promise<void> } {
  const events: JobEvent["body"][] = [];
  const ended = (async () => {
    for await (const event of other.jobs.events(record, undefined)) events.push(event.body);
  })();
  return { events, ended };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const oneMinuteOn = () => Date.now() + 61_000;

describe("a job the API removed from its queue always gets the end of its log", () => {
  it("a cancel whose end Redis refused: the job is gone, and any replica's sweep ends the log", async () => {
    const record = await queuedJob();
    const reader = follow(record);
    await withoutEventLogs();
    try {
      // removed (no worker will ever run it), but its log refused the end: the cancel fails
      await expect(remover.jobs.cancel(record.id)).rejects.toThrow(/NOPERM/);
    } finally {
      await withEverything();
    }
    expect((await other.jobs.get(record.id))?.status).toBe("cancelled");
    // the follower has read the log, and nothing ends it
    for (let i = 0; i < 100 && reader.events.length === 0; i++) await sleep(50);
    await sleep(300);
    expect(reader.events).toEqual([{ type: "status", status: "queued" }]);
    // not before a minute has passed: the remover may still be closing it
    expect(await other.jobs.removal.sweepRemovals()).toBe(0);
    expect(await other.jobs.removal.sweepRemovals(oneMinuteOn())).toBe(1);
    await reader.ended;
    expect(reader.events).toEqual([
      { type: "status", status: "queued" },
      { type: "error", error: { code: "CANCELLED", message: "job was cancelled" } },
      { type: "done" },
    ]);
    // swept once: nothing is left, and the log is not ended twice
    expect(await admin.zcard(keys.removals)).toBe(0);
    expect(await other.jobs.removal.sweepRemovals(oneMinuteOn())).toBe(0);
  });

  it("an expiry whose end Redis refused stays due, and its log is ended by the sweep", async () => {
    // due a minute on, past every timer of the replicas: the test's sweeps are the only ones
    const record = await queuedJob();
    const reader = follow(record);
    await withoutEventLogs();
    try {
      // the deadline sweep removes the job, and its end is refused
      expect(await remover.jobs.removal.sweepDeadlines(oneMinuteOn())).toBe(0);
      // ... so the job stays due (it was dropped from the set whatever happened, before)
      expect(await admin.zscore(keys.deadlines, record.id)).not.toBeNull();
    } finally {
      await withEverything();
    }
    // the next deadline sweep finds it gone and lets it go
    await other.jobs.removal.sweepDeadlines(oneMinuteOn());
    expect(await admin.zscore(keys.deadlines, record.id)).toBeNull();
    expect(await other.jobs.removal.sweepRemovals(oneMinuteOn())).toBe(1);
    await reader.ended;
    expect(reader.events.slice(1)).toEqual([
      {
        type: "error",
        error: { code: "DEADLINE_EXCEEDED", message: "deadline passed while queued; not computed" },
      },
      { type: "done" },
    ]);
    expect((await other.jobs.get(record.id))?.status).toBe("expired");
  });

  it("a cancel that ends the log itself leaves nothing to sweep; one that removed nothing writes nothing", async () => {
    const record = await queuedJob();
    const reader = follow(record);
    expect((await remover.jobs.cancel(record.id))?.status).toBe("cancelled");
    await reader.ended;
    expect(reader.events.map((e) => e.type)).toEqual(["status", "error", "done"]);
    expect(await admin.zcard(keys.removals)).toBe(0);
    // an intent whose job is still queued (its removal failed): dropped, the log untouched
    const queued = await queuedJob();
    await admin.zadd(keys.removals, Date.now(), JSON.stringify([queued.id, "m.v1", "CANCELLED"]));
    expect(await other.jobs.removal.sweepRemovals(oneMinuteOn())).toBe(0);
    expect(await admin.zcard(keys.removals)).toBe(0);
    const log = await admin.xrange(keys.events({ queue: "m.v1", id: queued.id }), "-", "+");
    expect(log.map(([, fields]) => JSON.parse(fields[1] ?? "{}").type)).toEqual(["status"]);
  });
});

describe("a deleted job is gone for every replica", () => {
  it("queued: cancelled (its readers get the end), then unknown; an ended one: its log and mark go too", async () => {
    const record = await queuedJob();
    const reader = follow(record);
    expect((await remover.jobs.delete(record.id))?.status).toBe("cancelled");
    await reader.ended;
    expect(reader.events.map((e) => e.type)).toEqual(["status", "error", "done"]);
    expect(await other.jobs.get(record.id)).toBeUndefined();
    expect(await admin.exists(keys.jobQueue(record.id))).toBe(0);
    // its cancel mark stays: a worker that took it past the broadcast still drops it
    expect(await admin.exists(keys.cancelled(record.id))).toBe(1);
    // deleted again, and an id never seen: nothing to delete
    expect(await remover.jobs.delete(record.id)).toBeUndefined();
    expect(await remover.jobs.delete("no-such-job")).toBeUndefined();
    // a job that ended (cancelled) before its delete: its log goes with it
    const ended = await queuedJob();
    await remover.jobs.cancel(ended.id);
    const log = keys.events({ queue: "m.v1", id: ended.id });
    expect(await admin.exists(log)).toBe(1);
    expect((await remover.jobs.delete(ended.id))?.status).toBe("cancelled");
    expect(await admin.exists(log, keys.jobQueue(ended.id), keys.cancelled(ended.id))).toBe(0);
  });
});

/**
 * A job on a queue of its own (the tests above leave jobs queued on m.v1), taken by a bare
 * BullMQ worker (active, locked); its log's key, and the answer a test ends it with.
 */
async function taken(model: string, token: string) {
  const record = await queuedJob(model);
  const worker = new Worker(bullQueueName(`${model}.v1`), null, {
    connection: createRedis(server.url),
    prefix,
  });
  const job = await worker.getNextJob(token);
  const log = keys.events({ queue: `${model}.v1`, id: record.id });
  const answer = { v: 1, rows: [{ rid: "r", ok: true, outputs: {} }] };
  return { record, worker, job, log, answer };
}

describe("a poll right after a job's log ended", () => {
  it("answers as the log ended while BullMQ still holds the job active (the worker ends the log first)", async () => {
    // the worker ends the job's log, not yet its BullMQ job
    const { record, worker, job, log, answer } = await taken("ended", "token-1");
    expect(job?.id).toBe(record.id);
    await admin.xadd(log, "*", "e", JSON.stringify({ type: "status", status: "running" }));
    expect((await other.jobs.get(record.id))?.status).toBe("running");
    await admin.xadd(log, "*", "e", JSON.stringify({ type: "result", result: answer }));
    await admin.xadd(log, "*", "e", JSON.stringify({ type: "done" }));
    const polled = await other.jobs.get(record.id);
    expect(polled).toMatchObject({ status: "succeeded", result: answer, error: null });
    expect(polled?.finished_at).toBeGreaterThan(0);
    await job?.moveToCompleted(answer, "token-1", false);
    expect((await other.jobs.get(record.id))?.status).toBe("succeeded");
    await worker.close();
  });
});

describe("a job BullMQ removed once it kept its time, its index still there", () => {
  it("answers as its log ended while the log stands, then unknown: never a 'failed' for a job that succeeded", async () => {
    const { record, worker, job, log, answer } = await taken("kept", "token-2");
    await admin.xadd(log, "*", "e", JSON.stringify({ type: "result", result: answer }));
    await admin.xadd(log, "*", "e", JSON.stringify({ type: "done" }));
    await job?.moveToCompleted(answer, "token-2", false);
    await worker.close();
    // BullMQ's removeOnComplete age, ahead of the index (kept to its deadline's slack too)
    await job?.remove();
    expect(await admin.exists(keys.jobQueue(record.id))).toBe(1);
    expect(await other.jobs.get(record.id)).toMatchObject({ status: "succeeded", result: answer });
    // the log's TTL too: nothing of the job is left to answer from
    await admin.del(log);
    expect(await other.jobs.get(record.id)).toBeUndefined();
  });
});

describe("a job queued longer than it is kept once it ends", () => {
  it("keeps its log and its index until its deadline has passed too: its readers never lose it while it waits", async () => {
    const record = await queuedJob("waits", 2);
    // before, the log took 2 s alone: it expired while the job still waited, and a follow
    // ended with no result
    const log = await admin.pttl(keys.events({ queue: "waits.v1", id: record.id }));
    const index = await admin.pttl(keys.jobQueue(record.id));
    for (const ttl of [log, index]) expect(ttl).toBeGreaterThan(55_000);
  });
});

describe("a job queued to be kept less than the deployment's time (a sync completion's)", () => {
  it("keeps its cancel or expiry mark and its ended log that long, not the deployment's day", async () => {
    // before, a cancel's mark and the log's end took the deployment's JOB_TTL_S (a day here)
    const cancelled = await queuedJob("short", 30);
    await remover.jobs.cancel(cancelled.id);
    const expired = await queuedJob("short", 30);
    expect(await remover.jobs.removal.expire(expired.id)).toBe(true);
    for (const record of [cancelled, expired]) {
      const log = keys.events({ queue: "short.v1", id: record.id });
      const ttl = await admin.ttl(log);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(30);
    }
    // the marks: the expiry's as long; the cancel's past the job's deadline too (a minute
    // ahead), so that a job whose removal failed is still dropped by a worker that takes it
    const expiredMark = await admin.ttl(keys.cancelled(expired.id));
    expect(expiredMark).toBeGreaterThan(0);
    expect(expiredMark).toBeLessThanOrEqual(30);
    const cancelMark = await admin.ttl(keys.cancelled(cancelled.id));
    expect(cancelMark).toBeGreaterThan(60);
    expect(cancelMark).toBeLessThanOrEqual(91);
    // an intent the sweep finishes keeps the job's time too
    const swept = await queuedJob("short", 30);
    await admin.zadd(
      keys.removals,
      Date.now(),
      JSON.stringify([swept.id, "short.v1", "DEADLINE_EXCEEDED", 30]),
    );
    // removed from its queue, as a remover that died before the log's end leaves it
    const queue = new Queue(bullQueueName("short.v1"), {
      connection: createRedis(server.url),
      prefix,
    });
    await queue.remove(swept.id);
    await queue.close();
    expect(await other.jobs.removal.sweepRemovals(oneMinuteOn())).toBe(1);
    for (const key of [
      keys.events({ queue: "short.v1", id: swept.id }),
      keys.cancelled(swept.id),
    ]) {
      const ttl = await admin.ttl(key);
      expect(ttl, key).toBeGreaterThan(0);
      expect(ttl, key).toBeLessThanOrEqual(30);
    }
  });
});
