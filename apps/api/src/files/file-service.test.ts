import { randomUUID } from "node:crypto";
import { createRedis } from "@ferry/transport";
import { beforeAll, describe, expect, it } from "vitest";
import { testInferenceClient } from "../../../../test/helpers/inference-client.js";
import { REDIS_URL } from "../../../../test/helpers/stack.js";
import type { MultipartEvent } from "../http/multipart.js";
import { FileService } from "./file-service.js";

const client = testInferenceClient();
beforeAll(() => client.ready());

const limits = { maxBytes: 50_000_000, maxLines: 50_000, maxLineBytes: 100_000 };
const noQuota = { maxBytes: 0, maxItems: 0 };
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
    const files = new FileService(client, limits, noQuota);
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
    // the retry's file is held at its size; the first attempt let go of its own reservation
    expect(await client.storage.usage(tenant.id)).toEqual({ bytes: file.length, items: 1 });
    await files.delete(id, tenant);
    expect(await client.storage.usage(tenant.id)).toEqual({ bytes: 0, items: 0 });
  });

  it("finds the file the first attempt stored, and refuses a retry with another payload (422)", async () => {
    // the first attempt stored its file whole and then failed to store its answer: its claim,
    // made before its body was read, never learnt the body's fingerprint
    const files = new FileService(client, limits, noQuota);
    const file = inputFile(50);
    const createdId = randomUUID();
    const first = await files.upload(
      uploadEvents(file, 4_096),
      tenant,
      createdId,
      false,
      undefined,
      () => "fingerprint-of-A",
    );
    // a retry of the same payload 30 s on takes the key over: the file it finds is its answer
    const same = await files.upload(
      uploadEvents(file, 4_096),
      tenant,
      createdId,
      true,
      undefined,
      () => "fingerprint-of-A",
    );
    expect(same.id).toBe(first.id);
    // another payload under the key is not that file (it had been answered with it, 200)
    await expect(
      files.upload(
        uploadEvents(inputFile(7), 4_096),
        tenant,
        createdId,
        true,
        undefined,
        () => "fingerprint-of-B",
      ),
    ).rejects.toMatchObject({ code: "IDEMPOTENCY_KEY_REUSED" });
  });

  it("keeps the retry's file when the first attempt wakes before it began its own", async () => {
    const files = new FileService(client, limits, noQuota);
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

describe("a tenant's file storage", () => {
  const quota = { maxBytes: 2_000_000, maxItems: 3 };
  const files = new FileService(client, limits, quota);
  const owner = () => ({ id: `q-${randomUUID().slice(0, 8)}`, admin: false });
  const stored = async (id: string) => (await client.files.get(id))?.status;

  it("holds each key to its bytes: an upload that may not fit is refused before a byte is stored", async () => {
    const t = owner();
    const file = inputFile(3_000); // ~900 KB
    const a = await files.upload(uploadEvents(file, 64 * 1024), t, undefined, false, file.length);
    const b = await files.upload(uploadEvents(file, 64 * 1024), t, undefined, false, file.length);
    expect(await client.storage.usage(t.id)).toEqual({ bytes: 2 * file.length, items: 2 });
    const createdId = randomUUID();
    const refused = files.upload(uploadEvents(file, 64 * 1024), t, createdId, false, file.length);
    await expect(refused).rejects.toMatchObject({
      code: "QUOTA_EXCEEDED",
      message: expect.stringMatching(/storage is full.*DELETE \/v1\/files/),
    });
    expect(await stored(`file-${createdId.replaceAll("-", "")}`)).toBeUndefined();
    expect(await client.storage.usage(t.id)).toEqual({ bytes: 2 * file.length, items: 2 });
    // another key is not held to this one's
    const other = owner();
    await files.upload(uploadEvents(file, 64 * 1024), other, undefined, false, file.length);
    // deleting a file frees its bytes
    await files.delete(a.id, t);
    const c = await files.upload(uploadEvents(file, 64 * 1024), t, undefined, false, file.length);
    expect(c.bytes).toBe(file.length);
    expect(await client.storage.usage(t.id)).toEqual({ bytes: 2 * file.length, items: 2 });
    for (const id of [b.id, c.id]) await files.delete(id, t);
    expect(await client.storage.usage(t.id)).toEqual({ bytes: 0, items: 0 });
  });

  it("reserves an upload of unknown length as it grows, and refuses it where it would cross", async () => {
    const t = owner();
    const small = inputFile(1_000);
    await files.upload(uploadEvents(small, 64 * 1024), t, undefined, false, undefined);
    expect(await client.storage.usage(t.id)).toEqual({ bytes: small.length, items: 1 });
    const big = inputFile(8_000); // ~2.4 MB: past the key's 2 MB with the first
    const createdId = randomUUID();
    await expect(
      files.upload(uploadEvents(big, 64 * 1024), t, createdId, false, undefined),
    ).rejects.toMatchObject({ code: "QUOTA_EXCEEDED" });
    expect(await stored(`file-${createdId.replaceAll("-", "")}`)).toBeUndefined();
    expect(await client.storage.usage(t.id)).toEqual({ bytes: small.length, items: 1 });
  });

  it("holds each key to its number of files, uploads in progress counted", async () => {
    const t = owner();
    const file = inputFile(10);
    let wake = () => {};
    const stalled = new Promise<void>((resolve) => {
      wake = resolve;
    });
    // one upload in progress, two whole
    const open = files.upload(uploadEvents(file, 4, stalled), t, undefined, false, file.length);
    for (let k = 0; k < 2; k++)
      await files.upload(uploadEvents(file, 1024), t, undefined, false, file.length);
    await expect(
      files.upload(uploadEvents(file, 1024), t, undefined, false, file.length),
    ).rejects.toMatchObject({ code: "QUOTA_EXCEEDED", message: expect.stringMatching(/3 files/) });
    wake();
    await open;
    expect((await client.storage.usage(t.id)).items).toBe(3);
  });

  it("an upload's reservation is a lease it renews, not the file's day: one whose API died goes in minutes", async () => {
    const t = owner();
    const file = inputFile(3_000);
    let wake = () => {};
    const stalled = new Promise<void>((resolve) => {
      wake = resolve;
    });
    const running = files.upload(uploadEvents(file, 64 * 1024, stalled), t, undefined, false);
    const redis = createRedis(REDIS_URL);
    try {
      const held = async () =>
        Object.fromEntries(
          chunked(await redis.zrange(client.keys.storageExpiry(t.id), 0, -1, "WITHSCORES")),
        );
      await waitUntil(async () => Object.keys(await held()).length === 1);
      const [[name, until]] = Object.entries(await held()) as [[string, string]];
      expect(name).toMatch(/^file-.+@\d+$/);
      const now = Date.now() / 1000;
      expect(Number(until)).toBeGreaterThan(now + 200);
      expect(Number(until)).toBeLessThanOrEqual(now + 301);
      // an upload that takes over a second: its share had been held from its start's second
      await new Promise((r) => setTimeout(r, 1_100));
      wake();
      const done = await running;
      // once whole, held as the file until it expires
      expect(await held()).toEqual({ [done.id]: String(done.expires_at) });
    } finally {
      redis.disconnect();
    }
  });

  it("does not hold the admin", async () => {
    const admin = { id: "admin", admin: true };
    const file = inputFile(8_000);
    for (let k = 0; k < 2; k++)
      await files.upload(uploadEvents(file, 64 * 1024), admin, undefined, false, file.length);
    expect(await client.storage.usage(admin.id)).toEqual({ bytes: 0, items: 0 });
  });
});

describe("a file's name", () => {
  it("is at most 255 characters: it is kept and listed with the file", async () => {
    const files = new FileService(client, limits, noQuota);
    async function* named(filename: string): AsyncGenerator<MultipartEvent> {
      yield { type: "part", name: "purpose", filename: undefined };
      yield { type: "data", data: Buffer.from("batch") };
      yield { type: "end" };
      yield { type: "part", name: "file", filename };
      yield { type: "data", data: inputFile(1) };
      yield { type: "end" };
    }
    const ok = await files.upload(named("n".repeat(255)), tenant, undefined, false);
    expect(ok.filename).toHaveLength(255);
    await expect(
      files.upload(named("n".repeat(16_000)), tenant, undefined, false),
    ).rejects.toMatchObject({
      code: "INVALID_INPUT",
      message: expect.stringMatching(/at most 255/),
    });
    await files.delete(ok.id, tenant);
  });
});

/** [a, 1, b, 2] as [[a, 1], [b, 2]]. */
function chunked(flat: string[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let k = 0; k + 1 < flat.length; k += 2) out.push([flat[k] ?? "", flat[k + 1] ?? ""]);
  return out;
}

async function waitUntil(check: () => Promise<boolean>): Promise<void> {
  for (let k = 0; k < 200 && !(await check()); k++) await new Promise((r) => setTimeout(r, 10));
}
