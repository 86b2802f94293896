import { randomUUID } from "node:crypto";
import { encodeChunkAnswers } from "@ferry/protocol";
import { type OpenAiBatchState, WriterFencedError } from "@ferry/transport";
import { beforeAll, describe, expect, it } from "vitest";
import { testInferenceClient } from "../../../../test/helpers/inference-client.js";
import { LinkedOutput } from "./linked-output.js";
import { outputFileOf } from "./output-file.js";

// A first run's files linked to the chunks it kept, on a real Redis (its own prefix).
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

/** Chunk k's answers: two lines, the second of chunk 1 failed (or none failed at all). */
const chunk = (k: number, failing = true) =>
  k === 1 && failing
    ? encodeChunkAnswers(["ok-1a"], ["err-1b"])
    : encodeChunkAnswers([`ok-${k}a`, `ok-${k}b`], []);

/** Keeps chunk k's answers as the run does, and tells `linked` of it. */
async function keep(linked: LinkedOutput, batch: string, k: number, failing = true) {
  const value = chunk(k, failing);
  const ok = k === 1 && failing ? 1 : 2;
  expect(await client.openAiBatches.recordChunk(batch, k, ok, 2 - ok, value)).toBe(true);
  linked.kept(k, value);
}

/** A file's content as the content route reads it (`FileStore.chunks`), checked linked. */
async function contentOf(id: string): Promise<string> {
  expect((await client.files.get(id))?.linked).toBeDefined();
  const parts: Buffer[] = [];
  for await (const part of client.files.chunks(id)) parts.push(part);
  return Buffer.concat(parts).toString();
}

describe("LinkedOutput", () => {
  it("links both files to chunks kept out of order, read in the input's order, sized as they read", async () => {
    const batch = await newBatch();
    const linked = await LinkedOutput.begin(client, batch);
    for (const k of [2, 0, 1]) await keep(linked, batch.id, k);
    const made = await linked.link(client, batch, 6);
    if (!made) throw new Error("not linked");
    const output = await contentOf(made.output?.id ?? "");
    const errors = await contentOf(made.errors?.id ?? "");
    expect(output).toBe("ok-0a\nok-0b\nok-1a\nok-2a\nok-2b\n");
    expect(errors).toBe("err-1b\n");
    expect([made.output?.bytes, made.output?.lines]).toEqual([Buffer.byteLength(output), 5]);
    expect([made.errors?.bytes, made.errors?.lines]).toEqual([Buffer.byteLength(errors), 1]);
    expect(made.output?.status).toBe("processed");
    // no copy: the files hold no chunk of their own
    expect(await client.files.chunk(made.output?.id ?? "", 0)).toBeUndefined();
    // the batch ends keeping its answers as long as its files
    await client.openAiBatches.finish(batch.id, "completed", {}, 600, linked.writer, true);
    expect(await client.openAiBatches.anyAnswered(batch.id)).toBe(true);
    // one file deleted: the other still reads them; both deleted: they go
    await client.files.delete(made.output?.id ?? "");
    expect(await contentOf(made.errors?.id ?? "")).toBe("err-1b\n");
    expect(await client.openAiBatches.anyAnswered(batch.id)).toBe(true);
    await client.files.delete(made.errors?.id ?? "");
    expect(await client.openAiBatches.anyAnswered(batch.id)).toBe(false);
  });

  it("makes no error file for a run with no failed line, and its output alone takes the answers with it", async () => {
    const batch = await newBatch();
    const linked = await LinkedOutput.begin(client, batch);
    for (const k of [0, 1, 2]) await keep(linked, batch.id, k, false);
    const made = await linked.link(client, batch, 6);
    if (!made) throw new Error("not linked");
    expect(made.errors).toBeUndefined();
    expect(made.output?.linked?.sibling).toBe("");
    await client.files.delete(made.output?.id ?? "");
    expect(await client.openAiBatches.anyAnswered(batch.id)).toBe(false);
  });

  it("links nothing once it gave up, a chunk came twice or is missing, or lines fall short", async () => {
    const given = await newBatch();
    const run = await LinkedOutput.begin(client, given);
    for (const k of [0, 1, 2]) await keep(run, given.id, k);
    run.giveUp();
    expect(await run.link(client, given, 6)).toBe(false);

    const twice = await LinkedOutput.begin(client, await newBatch());
    twice.kept(0, chunk(0));
    twice.kept(0, chunk(0));
    twice.kept(1, chunk(1));
    expect(await twice.link(client, { id: "b", owner: "" }, 6)).toBe(false);

    const gap = await LinkedOutput.begin(client, await newBatch());
    for (const k of [0, 2, 3]) gap.kept(k, chunk(k));
    expect(await gap.link(client, { id: "b", owner: "" }, 6)).toBe(false);

    const short = await LinkedOutput.begin(client, await newBatch());
    for (const k of [0, 1]) short.kept(k, chunk(k));
    expect(await short.link(client, { id: "b", owner: "" }, 6)).toBe(false);
  });

  it("a run that a later runner followed links nothing: the later one's writer fences it out", async () => {
    const batch = await newBatch();
    const first = await LinkedOutput.begin(client, batch);
    for (const k of [0, 1, 2]) await keep(first, batch.id, k);
    // a runner that took the batch over began its files under a later writer
    const later = await client.openAiBatches.finalizer(batch.id);
    await client.files.begin(outputFileOf(batch, "output"), later);
    await expect(first.link(client, batch, 6)).rejects.toBeInstanceOf(WriterFencedError);
  });
});
