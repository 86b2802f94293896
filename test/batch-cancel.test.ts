import { randomBytes } from "node:crypto";
import {
  bullQueueName,
  createRedis,
  deletePrefix,
  InferenceClient,
  type PackedOutputs,
  type PackedRows,
  WorkerTransport,
} from "@ferry/transport";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countKeys as countKeysUnder } from "./helpers/redis-keys.js";
import { ndjsonRows } from "./helpers/samples.js";
import { REDIS_URL, Stack, waitFor } from "./helpers/stack.js";

// Cancelling Ferry's own batches (`POST /v1/batches/{id}/cancel` with one of their ids): over
// HTTP on a stack whose worker serves digits only (an mnist batch waits, as one for a model
// no worker serves does), and on the transport with a chunk a worker holds.

const stack = new Stack({
  env: {
    WORKER_MODELS: "digits",
    API_KEYS: "k1,k2",
    // two 1,200-row mnist batches (3,763,200 bytes of rows each) fit, a third does not
    BATCH_ROWS_PER_KEY_BYTES: String(8_000_000),
    KEY_QUEUE_SHARE: "1",
  },
});
const prefix = `ferry-test-${randomBytes(4).toString("hex")}`;
const client = new InferenceClient({ redisUrl: REDIS_URL, prefix });
const workers: WorkerTransport[] = [];
beforeAll(async () => {
  await Promise.all([stack.start(), client.ready()]);
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.close()));
  await client.close();
  await deletePrefix(REDIS_URL, prefix);
  await stack.stop();
});

const k1 = { Authorization: "Bearer k1" };
const k2 = { Authorization: "Bearer k2" };
const countKeys = (pattern: string) => countKeysUnder(stack.prefix, pattern);

const post = (model: string, body: string) =>
  fetch(stack.url(`/v1/batches?model=${model}`), {
    method: "POST",
    headers: { ...k1, "content-type": "application/x-ndjson" },
    body,
  });
const cancel = (id: string, key = k1) =>
  fetch(stack.url(`/v1/batches/${id}/cancel`), { method: "POST", headers: key });

interface Status {
  status: string;
  total: number;
  succeeded: number;
  failed: number;
  finished_at: number | null;
  cancelled_at: number | null;
}

describe("POST /v1/batches/{id}/cancel, one of Ferry's own batches", () => {
  it("one no worker runs: its queued chunks and rows go, its rows are given back, it reads cancelled", async () => {
    const mnist = ndjsonRows("mnist", 1_200);
    const first = await post("mnist", mnist);
    expect(first.status).toBe(202);
    const { id } = (await first.json()) as { id: string };
    expect((await post("mnist", mnist)).status).toBe(202);
    // k1's rows budget is full: a third waits for one of them to run, or to be cancelled
    expect((await post("mnist", mnist)).status).toBe(403);
    expect(await countKeys(`batch-rows:{${id}}:*`)).toBe(2);
    expect(await countKeys(`*${id}-c*`)).toBeGreaterThan(0);

    // another key does not see it
    expect((await cancel(id, k2)).status).toBe(404);
    const res = await cancel(id);
    expect(res.status).toBe(200);
    const body = (await res.json()) as Status;
    expect(body).toMatchObject({ status: "cancelled", total: 1_200, succeeded: 0, failed: 0 });
    expect(body.cancelled_at).toEqual(expect.any(Number));
    expect(body.finished_at).toEqual(expect.any(Number));
    // its chunk jobs and their rows are gone from Redis
    expect(await countKeys(`batch-rows:{${id}}:*`)).toBe(0);
    expect(await countKeys(`*${id}-c*`)).toBe(0);
    // its rows are the key's again
    expect((await post("mnist", mnist)).status).toBe(202);

    const read = (await (
      await fetch(stack.url(`/v1/batches/${id}`), { headers: k1 })
    ).json()) as Status;
    expect(read).toMatchObject({ status: "cancelled", cancelled_at: body.cancelled_at });
    const results = await fetch(stack.url(`/v1/batches/${id}/results`), { headers: k1 });
    expect(results.status).toBe(200);
    expect((await results.text()).trim()).toBe("");
    // cancelling it again answers it as it is
    const again = await cancel(id);
    expect(again.status).toBe(200);
    expect(((await again.json()) as Status).cancelled_at).toBe(body.cancelled_at);
  });

  it("a row's key counts against the budget beside its row", async () => {
    // 1,200 mnist rows with keys of 512 characters: 3,763,200 bytes of rows and ~0.6 MB of
    // keys; two of them are past 8,000,000 by their keys alone
    const long = ndjsonRows("mnist", 1_200).replace(
      /"key":"r(\d+)"/g,
      (_, k) => `"key":"${k.padStart(512, "0")}"`,
    );
    const upload = (body: string) =>
      fetch(stack.url("/v1/batches?model=mnist"), {
        method: "POST",
        headers: { ...k2, "content-type": "application/x-ndjson" },
        body,
      });
    const first = await upload(long);
    expect(first.status).toBe(202);
    const second = await upload(long);
    expect(second.status).toBe(403);
    // rows with short keys fit beside it
    expect((await upload(ndjsonRows("mnist", 1_000))).status).toBe(202);
  });

  it("a completed batch is a 400, an unknown one a 404", async () => {
    const res = await post("digits", ndjsonRows("digits", 100));
    const { id } = (await res.json()) as { id: string };
    await waitFor(async () => {
      const got = await fetch(stack.url(`/v1/batches/${id}`), { headers: k1 });
      return ((await got.json()) as Status).status === "completed";
    }, 30_000);
    const refused = await cancel(id);
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(
      /Cannot cancel a batch with status completed/,
    );
    expect((await cancel("5f0c2a4e-0000-4000-8000-000000000000")).status).toBe(404);
  }, 40_000);
});

describe("cancelling a batch a worker is running", () => {
  /** Rows of two FP32 values each. */
  const rows = (n: number) => Buffer.from(new Float32Array(2 * n).fill(1).buffer);

  /** A sealed batch of `model` (version 1) of one chunk of two rows, keys a and b. */
  async function oneChunkBatch(model: string): Promise<string> {
    const id = await client.batches.create(model, "1", "k1");
    await client.batches.addChunk(id, model, "1", "k1", {
      index: 0,
      input: "x",
      keys: ["a", "b"],
      rows: rows(2),
    });
    await client.batches.seal(id, model, "1");
    return id;
  }

  function serve(queue: string, packed: (rows: PackedRows) => Promise<PackedOutputs>) {
    const worker = new WorkerTransport({ redisUrl: REDIS_URL, prefix });
    worker.consume(
      queue,
      { concurrency: 1, lockDurationMs: 5_000, stalledIntervalMs: 5_000 },
      async () => {
        throw new Error("no live rows here");
      },
      packed,
    );
    workers.push(worker);
  }

  it("the chunk it holds ends and is kept, the queued ones go, and it stays cancelled once its parent completes", async () => {
    let held: () => void = () => {};
    const taken = new Promise<void>((resolve) => {
      serve("held.v1", async ({ count }) => {
        resolve();
        await new Promise<void>((release) => (held = release));
        return { width: 2, values: new Float32Array(2 * count).fill(0.5), errors: {} };
      });
    });
    const id = await client.batches.create("held", "1", "k1");
    for (const index of [0, 1, 2])
      await client.batches.addChunk(id, "held", "1", "k1", {
        index,
        input: "x",
        keys: [`c${index}-a`, `c${index}-b`],
        rows: rows(2),
      });
    await client.batches.seal(id, "held", "1");
    await taken;

    expect(await client.batches.cancel(id)).toBe("cancelled");
    const redis = createRedis(REDIS_URL);
    try {
      // the two chunks no worker held are no longer queued
      expect(await redis.zcard(`${prefix}:${bullQueueName("held.v1")}:prioritized`)).toBe(0);
      expect(await redis.llen(`${prefix}:${bullQueueName("held.v1")}:wait`)).toBe(0);
    } finally {
      redis.disconnect();
    }
    held();
    // the held chunk is answered and its batch's parent runs: it completes, and still reads
    // as cancelled
    await waitFor(async () => (await client.batches.status(id))?.finished_at != null, 10_000);
    expect(await client.batches.status(id)).toMatchObject({
      status: "cancelled",
      total: 6,
      succeeded: 2,
      failed: 0,
    });
    const answered = [];
    for await (const page of client.batchResults.results(id)) answered.push(...page);
    expect(answered.map((row) => row.key)).toEqual(["c0-a", "c0-b"]);
  });

  it("a chunk taken after its rows went with its cancelled batch fails as not run, without retries", async () => {
    let calls = 0;
    const id = await oneChunkBatch("gone");
    // what a cancel leaves when a worker took the chunk between the removal of the queued
    // ones and the rows' deletion: the batch marked cancelled, the chunk's rows gone
    const redis = createRedis(REDIS_URL);
    try {
      await redis.hset(`${prefix}:batch:{${id}}`, "cancelled_at", Date.now());
      await redis.del(`${prefix}:batch-rows:{${id}}:0`);
    } finally {
      redis.disconnect();
    }
    serve("gone.v1", async () => {
      calls++;
      throw new Error("never called: the rows are gone");
    });
    await waitFor(async () => (await client.batches.status(id))?.finished_at != null, 10_000);
    expect(calls).toBe(0);
    expect(await client.batches.status(id)).toMatchObject({ status: "cancelled", failed: 2 });
    const answered = [];
    for await (const page of client.batchResults.results(id)) answered.push(...page);
    expect(answered).toEqual([
      { key: "a", error: { code: "CANCELLED", message: "not run: its batch was cancelled" } },
      { key: "b", error: { code: "CANCELLED", message: "not run: its batch was cancelled" } },
    ]);
  }, 20_000);

  it("a chunk a worker already runs is told its batch was cancelled, so that its batches not yet run are not", async () => {
    let started: () => void = () => {};
    const running = new Promise<void>((resolve) => (started = resolve));
    serve("watched.v1", async ({ count, stopped }) => {
      started();
      // a chunk's batches wait for instances; each asks before it runs
      await waitFor(async () => stopped?.() === true, 5_000);
      const errors: PackedOutputs["errors"] = {};
      for (let row = 0; row < count; row++)
        errors[row] = { code: "CANCELLED", message: "not run: its batch was cancelled" };
      return { width: 0, values: new Float32Array(0), errors };
    });
    const id = await oneChunkBatch("watched");
    await running;
    expect(await client.batches.cancel(id)).toBe("cancelled");
    await waitFor(async () => (await client.batches.status(id))?.finished_at != null, 10_000);
    expect(await client.batches.status(id)).toMatchObject({ status: "cancelled", failed: 2 });
  }, 20_000);
});
