import { randomBytes } from "node:crypto";
import {
  encodeBlocks,
  FerryError,
  packValues,
  type RowResult,
  valuesRecordLength,
  writeValuesRecord,
} from "@ferry/protocol";
import {
  bullQueueName,
  ChunkRun,
  createRedis,
  deletePrefix,
  InferenceClient,
  type PackedHandler,
  WorkerTransport,
} from "@ferry/transport";
import { Queue } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REDIS_URL, waitFor } from "./helpers/stack.js";

// A packed chunk run for a caller that holds its rows (an OpenAI batch's predict lines), on
// the test run's Redis under this file's own prefix, a WorkerTransport answering it.
const prefix = `ferry-test-${randomBytes(4).toString("hex")}`;
const client = new InferenceClient({ redisUrl: REDIS_URL, prefix });
const workers: WorkerTransport[] = [];
beforeAll(() => client.ready());
afterAll(async () => {
  await Promise.all(workers.map((w) => w.close()));
  await client.close();
  await deletePrefix(REDIS_URL, prefix);
});

const unused = async (): Promise<RowResult> => {
  throw new Error("no live rows in this file");
};

function serve(queue: string, packed: PackedHandler | undefined) {
  const worker = new WorkerTransport({ redisUrl: REDIS_URL, prefix });
  worker.consume(
    queue,
    { concurrency: 4, lockDurationMs: 5_000, stalledIntervalMs: 5_000 },
    unused,
    packed,
  );
  workers.push(worker);
}

/** Rows of two FP32 values: row r holds (r + 1, -(r + 1)). */
const rowsOf = (n: number) =>
  Buffer.from(
    Float32Array.from({ length: 2 * n }, (_, k) => (k % 2 === 0 ? 1 : -1) * (Math.floor(k / 2) + 1))
      .buffer,
  );

describe("batches take turns", () => {
  it("a batch's first chunk is queued before the second of a batch queued earlier, whoever's", async () => {
    const queue = "fair.v1";
    const big = await client.batches.create("fair", "1", "k1");
    const small = await client.batches.create("fair", "1", "k2");
    const chunk = (index: number) => ({ index, input: "x", keys: [`r${index}`], rows: rowsOf(1) });
    const ids: Record<string, string> = {};
    for (const index of [0, 1, 2])
      ids[`big-${index}`] = await client.batches.addChunk(big, "fair", "1", "k1", chunk(index));
    ids["small-0"] = await client.batches.addChunk(small, "fair", "1", "k2", chunk(0));
    const redis = createRedis(REDIS_URL);
    try {
      const order = await redis.zrange(`${prefix}:${bullQueueName(queue)}:prioritized`, 0, -1);
      const name = Object.fromEntries(Object.entries(ids).map(([k, v]) => [v, k]));
      // first come first served, it was big-0, big-1, big-2, small-0
      expect(order.map((id) => name[id])).toEqual(["big-0", "small-0", "big-1", "big-2"]);
    } finally {
      redis.disconnect();
    }
  });
});

describe("keys take turns, however many batches each has", () => {
  /** The queue's prioritized chunks in BullMQ's order, named by `ids`. */
  const orderOf = async (queue: string, ids: Record<string, string>) => {
    const redis = createRedis(REDIS_URL);
    try {
      const order = await redis.zrange(`${prefix}:${bullQueueName(queue)}:prioritized`, 0, -1);
      const name = Object.fromEntries(Object.entries(ids).map(([k, v]) => [v, k]));
      return order.map((id) => name[id]);
    } finally {
      redis.disconnect();
    }
  };
  const chunk = (index: number) => ({ index, input: "x", keys: [`r${index}`], rows: rowsOf(1) });

  it("a key's four batches of one chunk each: another key's one runs second, not fifth", async () => {
    const ids: Record<string, string> = {};
    for (const n of [0, 1, 2, 3]) {
      const batch = await client.batches.create("many", "1", "k1");
      ids[`k1-${n}`] = await client.batches.addChunk(batch, "many", "1", "k1", chunk(0));
    }
    const other = await client.batches.create("many", "1", "k2");
    ids["k2-0"] = await client.batches.addChunk(other, "many", "1", "k2", chunk(0));
    // first come first served (a chunk's turn its place in its batch), k2's was fifth
    expect(await orderOf("many.v1", ids)).toEqual(["k1-0", "k2-0", "k1-1", "k1-2", "k1-3"]);
  });

  it("a key whose chunks have all run starts again at the first waiting turn, not after its old ones", async () => {
    const ids: Record<string, string> = {};
    const old = await client.batches.create("again", "1", "k1");
    for (const index of [0, 1, 2])
      await client.batches.addChunk(old, "again", "1", "k1", chunk(index));
    // its three chunks run (taken from the queue): none of k1's waits any more
    const redis = createRedis(REDIS_URL);
    const queue = new Queue(bullQueueName("again.v1"), { connection: redis, prefix });
    await queue.drain();
    // past the 2 s a chunk with no job counts as on its way (its add not landed yet)
    await new Promise((r) => setTimeout(r, 2_100));
    const k2 = await client.batches.create("again", "1", "k2");
    for (const index of [0, 1])
      ids[`k2-${index}`] = await client.batches.addChunk(k2, "again", "1", "k2", chunk(index));
    const fresh = await client.batches.create("again", "1", "k1");
    ids["k1-0"] = await client.batches.addChunk(fresh, "again", "1", "k1", chunk(0));
    await queue.close();
    redis.disconnect();
    // k1's turn 3 (after its old turn 2) would have put it behind k2's second
    expect(await orderOf("again.v1", ids)).toEqual(["k2-0", "k1-0", "k2-1"]);
  });

  it("with one tenant (no API keys) each batch's first chunk goes before any batch's second", async () => {
    const ids: Record<string, string> = {};
    const big = await client.batches.create("alone", "1", "");
    for (const index of [0, 1])
      ids[`big-${index}`] = await client.batches.addChunk(big, "alone", "1", "", chunk(index));
    const small = await client.batches.create("alone", "1", "");
    ids["small-0"] = await client.batches.addChunk(small, "alone", "1", "", chunk(0));
    expect(await orderOf("alone.v1", ids)).toEqual(["big-0", "small-0", "big-1"]);
  });
});

describe("ChunkRun: packed chunks run for a caller that holds their rows", () => {
  it("answers the rows in order, a row's error in its place, and keeps no key's prediction", async () => {
    serve("echo.v1", async ({ rows }) => {
      const values = new Float32Array(
        rows.buffer.slice(rows.byteOffset, rows.byteOffset + rows.length),
      );
      return { width: 2, values, errors: { 3: { code: "MODEL_ERROR", message: "row 3" } } };
    });
    const keys = Array.from({ length: 5 }, (_, k) => `line-${k}`);
    const run = new ChunkRun(client.batches, "");
    const out = await run.run(
      "echo",
      "1",
      { input: "x", keys, rows: rowsOf(5) },
      new AbortController().signal,
    );
    expect(out?.keys).toEqual(keys);
    expect(Array.from(out?.values ?? [])).toEqual([1, -1, 2, -2, 3, -3, 4, -4, 5, -5]);
    expect(out?.errors).toEqual({ 3: { code: "MODEL_ERROR", message: "row 3" } });
    expect(await client.batchResults.prediction("echo", "line-0", "")).toBeUndefined();
    await run.close(false);
  });

  it("chunks of packed blocks are each answered from their own rows, the arrays they decode into handed from chunk to chunk", async () => {
    serve("blocks.v1", async ({ rows }) => {
      // a copy: the rows' array goes to the next chunk once this one is answered
      const values = new Float32Array(
        rows.buffer.slice(rows.byteOffset, rows.byteOffset + rows.length),
      );
      return { width: 2, values, errors: {} };
    });
    const run = new ChunkRun(client.batches, "");
    /** `n` rows of two values, chunk `c`'s own: bytes mostly, one value a row listed apart. */
    const chunkOf = (c: number, n: number) => {
      const values = Float32Array.from({ length: 2 * n }, (_, k) =>
        k % 2 === 0 ? (c * 10 + k) % 256 : c + k / 4,
      );
      const keys = Array.from({ length: n }, (_, k) => `b${c}-${k}`);
      return {
        values,
        chunk: {
          input: "x",
          keys,
          rows: encodeBlocks([packValues(values)]),
          encoding: "blocks" as const,
        },
      };
    };
    const answer = async (c: number, n: number) => {
      const { values, chunk } = chunkOf(c, n);
      const out = await run.run("blocks", "1", chunk, new AbortController().signal);
      expect(out?.keys).toEqual(chunk.keys);
      expect(Array.from(out?.values ?? [])).toEqual(Array.from(values));
    };
    // a large chunk, then smaller ones into its array, then several at once
    await answer(0, 40);
    await answer(1, 3);
    await answer(2, 17);
    await Promise.all([answer(3, 9), answer(4, 40), answer(5, 1), answer(6, 25)]);
    await answer(7, 2);
    await run.close(false);
  });

  it("chunks whose rows lie in a batch input file are read there, in order; a deleted file's lines fail at once, as such", async () => {
    serve("filed.v1", async ({ rows }) => {
      const values = new Float32Array(
        rows.buffer.slice(rows.byteOffset, rows.byteOffset + rows.length),
      );
      return { width: 2, values, errors: {} };
    });
    const file = `file-${randomBytes(4).toString("hex")}`;
    await client.files.begin({ id: file, owner: "", filename: "in.jsonl", purpose: "batch" });
    // chunk c: c + 2 rows of two values, bytes mostly, one value a row listed apart
    const chunkValues = [0, 1, 2].map((c) =>
      Float32Array.from({ length: 2 * (c + 2) }, (_, k) =>
        k % 2 === 0 ? (c * 10 + k) % 256 : c + k / 4,
      ),
    );
    for (const [c, values] of chunkValues.entries()) {
      const block = packValues(values);
      const rows = new Uint8Array(valuesRecordLength(block));
      writeValuesRecord(block, rows, 0);
      const head = Buffer.from("the API's part");
      await client.files.append(file, Buffer.from(`line ${c}\n`), 1, [], "", { head, rows });
    }
    const run = new ChunkRun(client.batches, "");
    const signal = new AbortController().signal;
    const keys = Array.from({ length: 6 }, (_, k) => `f${k}`);
    const out = await run.run(
      "filed",
      "1",
      { input: "x", keys, file: { id: file, chunks: [0, 2] } },
      signal,
    );
    expect(out?.keys).toEqual(keys);
    expect(Array.from(out?.values ?? [])).toEqual([
      ...Array.from(chunkValues[0] ?? []),
      ...Array.from(chunkValues[2] ?? []),
    ]);
    // no copy of the rows beside the batch: the worker read them from the file
    const redis = createRedis(REDIS_URL);
    try {
      expect(await redis.keys(`${prefix}:batch-rows:{${out?.batch}}:*`)).toEqual([]);
    } finally {
      redis.disconnect();
    }
    await client.files.delete(file);
    const gone = await run.run(
      "filed",
      "1",
      { input: "x", keys: ["g0", "g1", "g2"], file: { id: file, chunks: [1] } },
      signal,
    );
    expect(gone?.width).toBe(0);
    for (const row of [0, 1, 2])
      expect(gone?.errors[row]).toMatchObject({
        code: "NOT_FOUND",
        message: expect.stringMatching(/input file file-\w+ was deleted before this line ran/),
      });
    await run.close(false);
  });

  it("a run's chunks share one batch, answered each in its own order, which completes once the run closes", async () => {
    const run = new ChunkRun(client.batches, "");
    const chunks = [3, 1, 4].map((n, c) => ({
      input: "x",
      keys: Array.from({ length: n }, (_, k) => `c${c}-${k}`),
      rows: rowsOf(n),
    }));
    const outs = await Promise.all(
      chunks.map((chunk) => run.run("echo", "1", chunk, new AbortController().signal)),
    );
    outs.forEach((out, c) => {
      expect(out?.keys).toEqual(chunks[c]?.keys);
      expect(out?.values.length).toBe(2 * (chunks[c]?.keys.length ?? 0));
    });
    const ids = new Set(outs.map((out) => out?.batch));
    expect(ids.size).toBe(1);
    const id = [...ids][0] as string;
    expect((await client.batches.status(id))?.status).not.toBe("completed");
    await run.close(false);
    await waitFor(async () => (await client.batches.status(id))?.status === "completed", 10_000);
    expect((await client.batches.status(id))?.total).toBe(8);
  });

  it("a chunk that fails for good (its model takes no chunks) answers every row failed", async () => {
    serve("nobody.v1", undefined);
    const out = await new ChunkRun(client.batches, "").run(
      "nobody",
      "1",
      { input: "x", keys: ["a", "b"], rows: rowsOf(2) },
      new AbortController().signal,
    );
    expect(out?.width).toBe(0);
    expect(Object.keys(out?.errors ?? {})).toEqual(["0", "1"]);
    expect(out?.errors[1]?.message).toMatch(/takes no offline batches/);
  }, 30_000);

  it("a chunk not answered by its deadline: DEADLINE_EXCEEDED, and its queued job is removed", async () => {
    const run = new ChunkRun(client.batches, "");
    const asked = run.run(
      "idle",
      "1",
      { input: "x", keys: ["a"], rows: rowsOf(1) },
      new AbortController().signal,
      Date.now() + 300,
    );
    await expect(asked).rejects.toThrow(FerryError);
    await expect(asked).rejects.toThrow(/not answered in time/);
    const redis = createRedis({ url: REDIS_URL });
    const queue = new Queue(bullQueueName("idle.v1"), { connection: redis, prefix });
    // a chunk's low priority queues it among BullMQ's prioritized jobs
    expect(await queue.getJobCountByTypes("waiting", "prioritized")).toBe(0);
    await run.close(true);
    await queue.close();
    redis.disconnect();
  });

  it("stops waiting when its batch is cancelled: undefined, nothing thrown", async () => {
    const stop = new AbortController();
    // no worker serves this queue: the chunk waits in BullMQ
    const asked = new ChunkRun(client.batches, "").run(
      "idle",
      "1",
      { input: "x", keys: ["a"], rows: rowsOf(1) },
      stop.signal,
    );
    setTimeout(() => stop.abort(), 200);
    expect(await asked).toBeUndefined();
  });
  it("a run longer than half the time its batches are kept: a new batch takes its chunks, the old one sealed and completed", async () => {
    // batches kept 2 s: a run's batch takes chunks for 1 s
    const short = new InferenceClient({ redisUrl: REDIS_URL, prefix, jobTtlS: 2 });
    await short.ready();
    try {
      const run = new ChunkRun(short.batches, "");
      const chunk = () => ({ input: "x", keys: ["a", "b"], rows: rowsOf(2) });
      const never = new AbortController().signal;
      const first = await run.run("echo", "1", chunk(), never);
      await new Promise((r) => setTimeout(r, 1_200));
      const second = await run.run("echo", "1", chunk(), never);
      expect(second?.batch).not.toBe(first?.batch);
      await waitFor(
        async () => (await short.batches.status(first?.batch ?? ""))?.status === "completed",
        10_000,
      );
      await run.close(false);
      await waitFor(
        async () => (await short.batches.status(second?.batch ?? ""))?.status === "completed",
        10_000,
      );
    } finally {
      await short.close();
    }
  });

  it("a chunk whose job went with no answers stored (failed past its stall limit, removed) fails in seconds, not at its deadline", async () => {
    const run = new ChunkRun(client.batches, "");
    // a queue of its own: no other test's chunk in it
    const asked = run.run(
      "gone",
      "1",
      { input: "x", keys: ["a"], rows: rowsOf(1) },
      new AbortController().signal,
      Date.now() + 60_000,
    );
    const redis = createRedis({ url: REDIS_URL });
    const queue = new Queue(bullQueueName("gone.v1"), { connection: redis, prefix });
    try {
      let ids: string[] = [];
      await waitFor(async () => {
        ids = (await queue.getJobs(["prioritized", "waiting"])).map((j) => j.id ?? "");
        return ids.length > 0;
      }, 5_000);
      for (const id of ids) await queue.remove(id);
      const started = Date.now();
      await expect(asked).rejects.toThrow(/failed on the model/);
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      await run.close(true);
      await queue.close();
      redis.disconnect();
    }
  });

  it("a run closed as stopped while a worker holds one of its chunks: the queued ones go, the held one ends, its batch completes", async () => {
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    let started = 0;
    serve("slow.v1", async ({ rows }) => {
      started++;
      await held;
      const values = new Float32Array(
        rows.buffer.slice(rows.byteOffset, rows.byteOffset + rows.length),
      );
      return { width: 2, values, errors: {} };
    });
    const run = new ChunkRun(client.batches, "");
    const stop = new AbortController();
    const asks = [0, 1, 2, 3, 4, 5].map(() =>
      run.run("slow", "1", { input: "x", keys: ["a"], rows: rowsOf(1) }, stop.signal),
    );
    await waitFor(async () => started > 0, 10_000);
    stop.abort();
    expect(await Promise.all(asks)).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    await run.close(true);
    const redis = createRedis({ url: REDIS_URL });
    const queue = new Queue(bullQueueName("slow.v1"), { connection: redis, prefix });
    try {
      // a chunk's low priority queues it among BullMQ's prioritized jobs
      expect(await queue.getJobCountByTypes("waiting", "prioritized")).toBe(0);
      const active = await queue.getJobs(["active"]);
      const batch = active[0]?.data.batch as string;
      expect(typeof batch).toBe("string");
      expect((await client.batches.status(batch))?.status).not.toBe("completed");
      release();
      // sealed: it completes once the held chunk ends, no other chunk of it run
      await waitFor(
        async () => (await client.batches.status(batch))?.status === "completed",
        10_000,
      );
      expect(active.length).toBeLessThan(6);
      expect(started).toBe(active.length);
    } finally {
      release();
      await queue.close();
      redis.disconnect();
    }
  });
});
