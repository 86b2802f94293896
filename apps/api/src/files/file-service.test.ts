import { randomUUID } from "node:crypto";
import { deletePrefix, InferenceClient } from "@ferry/transport";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MultipartEvent } from "../http/multipart.js";
import { FileService } from "./file-service.js";

const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
const prefix = `ferry-test-files-${randomUUID().slice(0, 8)}`;
const client = new InferenceClient({ redisUrl: url, prefix });
beforeAll(() => client.ready());
afterAll(async () => {
  await deletePrefix(url, prefix);
  await client.close();
});

const limits = { maxBytes: 50_000_000, maxLines: 50_000, maxLineBytes: 100_000 };
const tenant = { id: "t1", admin: false };

/** A batch input file of `lines` lines, ~300 KiB a thousand: several stored chunks. */
function inputFile(lines: number): Buffer {
  const text = Array.from({ length: lines }, (_, k) =>
    JSON.stringify({
      custom_id: `c${k}`,
      method: "POST",
      url: "/v1/models/digits/predict",
      body: { features: Array.from({ length: 64 }, (_, i) => (k + i) % 17) },
    }),
  );
  return Buffer.from(`${text.join("\n")}\n`);
}

/**
 * An upload's events, the file in pieces; `gate` holds the events after the first piece, or
 * (`gateFirst`) before the file begins.
 */
async function* uploadEvents(
  file: Buffer,
  piece: number,
  gate?: Promise<void>,
  gateFirst = false,
): AsyncGenerator<MultipartEvent> {
  yield { type: "part", name: "purpose", filename: undefined };
  yield { type: "data", data: Buffer.from("batch") };
  yield { type: "end" };
  if (gateFirst) await gate;
  yield { type: "part", name: "file", filename: "in.jsonl" };
  for (let at = 0; at < file.length; at += piece) {
    yield { type: "data", data: file.subarray(at, at + piece) };
    if (at === 0 && !gateFirst) await gate;
  }
  yield { type: "end" };
}

describe("an upload whose Idempotency-Key a retry took over", () => {
  it("keeps the retry's file whole while the first attempt, stalled, wakes and writes on", async () => {
    const files = new FileService(client, limits);
    const file = inputFile(3_000);
    const createdId = randomUUID();
    let wake = () => {};
    const stalled = new Promise<void>((resolve) => {
      wake = resolve;
    });
    // the first attempt stores its first chunks, then stalls (its claim went stale)
    const first = files.upload(uploadEvents(file, 400_000, stalled), tenant, createdId, false);
    const id = `file-${createdId.replaceAll("-", "")}`;
    for (let k = 0; k < 100 && !(await client.files.chunk(id, 0)); k++)
      await new Promise((r) => setTimeout(r, 10));
    expect(await client.files.chunk(id, 0)).toBeDefined();

    const retry = await files.upload(uploadEvents(file, 64 * 1024), tenant, createdId, true);
    expect(retry).toMatchObject({ id, bytes: file.length, status: "processed" });

    wake();
    // the first attempt is refused its next write, and leaves the retry's file alone
    await expect(first).rejects.toMatchObject({ code: "UNAVAILABLE" });
    const kept = await client.files.get(id);
    expect(kept).toMatchObject({ status: "processed", bytes: file.length, lines: 3_000 });
    const chunks: Buffer[] = [];
    for await (const chunk of client.files.chunks(id)) chunks.push(chunk);
    const content = Buffer.concat(chunks);
    expect(content.equals(file)).toBe(true);
  });

  it("keeps the retry's file when the first attempt wakes before it began its own", async () => {
    const files = new FileService(client, limits);
    const createdId = randomUUID();
    const id = `file-${createdId.replaceAll("-", "")}`;
    let wake = () => {};
    const stalled = new Promise<void>((resolve) => {
      wake = resolve;
    });
    // the first attempt has its claim and its purpose, and stalls before its file part
    const first = files.upload(
      uploadEvents(inputFile(2_000), 400_000, stalled, true),
      tenant,
      createdId,
      false,
    );
    await new Promise((r) => setTimeout(r, 20));
    const file = inputFile(3_000);
    const retry = await files.upload(uploadEvents(file, 64 * 1024), tenant, createdId, true);
    expect(retry).toMatchObject({ id, bytes: file.length });
    wake();
    await expect(first).rejects.toMatchObject({ code: "UNAVAILABLE" });
    expect(await client.files.get(id)).toMatchObject({ status: "processed", lines: 3_000 });
    const chunks: Buffer[] = [];
    for await (const chunk of client.files.chunks(id)) chunks.push(chunk);
    expect(Buffer.concat(chunks).equals(file)).toBe(true);
  });
});
