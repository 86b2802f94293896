import { randomUUID } from "node:crypto";
import { pause } from "@ferry/protocol";
import { InferenceClient, type OpenAiBatchState, WriterFencedError } from "@ferry/transport";
import { beforeAll, describe, expect, it } from "vitest";
import { testInferenceClient } from "../../../../test/helpers/inference-client.js";
import { REDIS_URL } from "../../../../test/helpers/stack.js";
import { encodeChunkAnswers } from "./chunk-answers.js";
import { StreamedOutput } from "./streamed-output.js";

// A run's files written as its chunks are kept, on a real Redis (its own prefix).
const client = testInferenceClient();
beforeAll(() => client.ready());

async function newBatch(): Promise<OpenAiBatchState> {
  const id = `batch_${randomUUID().replaceAll("-", "")}`;
  const now = Math.floor(Date.now() / 1000);
  await client.openAiBatches.create(
    {
      id,
      owner: "",
      endpoint: "/v1/models/{model}/predict",
      input_file_id: "file-none",
      completion_window: "24h",
      created_at: now,
      expires_at: now + 3_600,
      total: 6,
      metadata: null,
    },
    600,
  );
  return (await client.openAiBatches.get(id)) as OpenAiBatchState;
}

/** Chunk k's kept answers: two lines, the second of chunk 1 failed. */
const chunk = (k: number) =>
  k === 1
    ? encodeChunkAnswers(["ok-1a"], ["err-1b"])
    : encodeChunkAnswers([`ok-${k}a`, `ok-${k}b`], []);

async function linesOf(id: string): Promise<string[]> {
  const lines: string[] = [];
  for await (const part of client.files.lines(id)) lines.push(...part);
  return lines;
}

describe("StreamedOutput", () => {
  it("writes chunks kept out of order in the input's order, and is whole once every line is in", async () => {
    const batch = await newBatch();
    const streamed = await StreamedOutput.begin(client, batch);
    streamed.kept(2, chunk(2));
    streamed.kept(1, chunk(1));
    // chunk 0 not kept yet: nothing can be written, and the files are not whole
    expect(await streamed.whole(6)).toBeUndefined();
    streamed.kept(0, chunk(0));
    const written = await streamed.whole(6);
    expect(written).toBeDefined();
    const output = await written?.output.close();
    const errors = await written?.errors.close();
    expect(await linesOf(output?.id ?? "")).toEqual(["ok-0a", "ok-0b", "ok-1a", "ok-2a", "ok-2b"]);
    expect(await linesOf(errors?.id ?? "")).toEqual(["err-1b"]);
  });

  it("begins a file with its first line, and keeps it the TTL from when it is whole", async () => {
    // files kept 3 s: a run whose first answers come later than that still closes its files
    const shortLived = new InferenceClient({
      redisUrl: REDIS_URL,
      prefix: client.keys.prefix,
      jobTtlS: 3,
    });
    await shortLived.ready();
    try {
      const batch = await newBatch();
      const streamed = await StreamedOutput.begin(shortLived, batch);
      await pause(3_500);
      for (const k of [0, 1, 2]) streamed.kept(k, encodeChunkAnswers([`ok-${k}a`, `ok-${k}b`], []));
      const written = await streamed.whole(6);
      // no failed line: no error file was begun, and closing it leaves nothing
      expect(await written?.errors.close()).toBeUndefined();
      const closedAt = Math.floor(Date.now() / 1000);
      const output = await written?.output.close();
      expect(output?.expires_at).toBeGreaterThanOrEqual(closedAt + 3);
      expect(await linesOf(output?.id ?? "")).toHaveLength(6);
    } finally {
      await shortLived.close();
    }
  });

  it("leaves the files to the finalizer once it gives up, or once a later run began them", async () => {
    const given = await StreamedOutput.begin(client, await newBatch());
    given.kept(0, chunk(0));
    given.giveUp();
    given.kept(1, chunk(1));
    given.kept(2, chunk(2));
    expect(await given.whole(6)).toBeUndefined();

    // a runner that took the batch over begins both files again: the first run writes nothing more
    const batch = await newBatch();
    const first = await StreamedOutput.begin(client, batch);
    first.kept(0, chunk(0));
    await first.whole(6);
    first.kept(1, chunk(1));
    first.kept(2, chunk(2));
    const stale = await first.whole(6);
    const later = await StreamedOutput.begin(client, batch);
    for (const k of [0, 1, 2]) later.kept(k, chunk(k));
    const written = await later.whole(6);
    // the first run's lines are held until a chunk's worth is: it learns on storing them, or
    // on closing, that a later run began the files again
    await expect(stale?.output.close()).rejects.toBeInstanceOf(WriterFencedError);
    await expect(stale?.errors.close()).rejects.toBeInstanceOf(WriterFencedError);
    const output = await written?.output.close();
    expect(await linesOf(output?.id ?? "")).toEqual(["ok-0a", "ok-0b", "ok-1a", "ok-2a", "ok-2b"]);
  });
});
