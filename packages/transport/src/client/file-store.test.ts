import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REDIS_URL } from "../../../../test/helpers/stack.js";
import { createRedis, deletePrefix } from "../shared/connection.js";
import { Keys } from "../shared/keys.js";
import { FileStore, WriterFencedError } from "./file-store.js";

const keys = new Keys(`ferry-test-${randomBytes(4).toString("hex")}`);
const redis = createRedis(REDIS_URL);
const store = new FileStore(redis, keys, 600);
beforeAll(async () => {
  await redis.ping();
});
afterAll(async () => {
  await deletePrefix(REDIS_URL, keys.prefix);
  redis.disconnect();
});

const file = { id: "file-fenced", owner: "t", filename: "out.jsonl", purpose: "batch_output" };
const lines = async (id: string) => {
  const all: string[] = [];
  for await (const chunk of store.lines(id)) all.push(...chunk);
  return all;
};

describe("FileStore writers", () => {
  it("once a second writer begins a file, the first one's appends, finish and discard change nothing", async () => {
    await store.begin(file, "1");
    await store.append(file.id, Buffer.from("a1\na2\n"), 2, [], "1");
    // the first writer's runner lost its batch; the one that took it over starts the file again
    await store.begin(file, "2");
    await expect(store.append(file.id, Buffer.from("a3\n"), 1, [], "1")).rejects.toBeInstanceOf(
      WriterFencedError,
    );
    await store.append(file.id, Buffer.from("b1\nb2\n"), 2, [], "2");
    await expect(store.finish(file.id, file.owner, [], "1")).rejects.toBeInstanceOf(
      WriterFencedError,
    );
    await store.discard(file.id, "1");
    expect((await store.get(file.id))?.status).toBe("uploading");
    const done = await store.finish(file.id, file.owner, [], "2");
    expect(done).toMatchObject({ status: "processed", lines: 2 });
    expect(await lines(file.id)).toEqual(["b1", "b2"]);
    // the earlier writer cannot begin it again over the later one's file
    await expect(store.begin(file, "1")).rejects.toBeInstanceOf(WriterFencedError);
    expect(await lines(file.id)).toEqual(["b1", "b2"]);
    // the writer that began it last may discard it
    await store.discard(file.id, "2");
    expect(await store.get(file.id)).toBeUndefined();
  });

  it("a file begun without a writer (an upload) takes appends as before", async () => {
    const upload = { ...file, id: "file-upload", purpose: "batch" };
    await store.begin(upload);
    expect(await store.append(upload.id, Buffer.from("x\n"), 1, ["c1"])).toBeUndefined();
    expect(await store.append(upload.id, Buffer.from("y\n"), 1, ["c1"])).toBe(0);
    expect((await store.finish(upload.id, upload.owner, [])).lines).toBe(1);
  });
});

describe("FileStore expiry", () => {
  it("keeps a file the TTL from when it is whole, not from when it was begun", async () => {
    const shortLived = new FileStore(redis, keys, 3);
    const slow = { id: "file-slow", owner: "t", filename: "out.jsonl", purpose: "batch_output" };
    await shortLived.begin(slow, "1");
    await new Promise((r) => setTimeout(r, 2_100));
    await shortLived.append(slow.id, Buffer.from("a\n"), 1, [], "1");
    const finishedAt = Math.floor(Date.now() / 1000);
    const done = await shortLived.finish(slow.id, slow.owner, [], "1");
    expect(done.expires_at).toBeGreaterThanOrEqual(finishedAt + 3);
    expect(await redis.ttl(keys.file(slow.id))).toBeGreaterThan(1);
  });
});

describe("FileStore custom_ids", () => {
  it("tells apart ids that UTF-8 would make one (lone surrogates), and still finds a repeat", async () => {
    const input = { id: "file-ids", owner: "t", filename: "in.jsonl", purpose: "batch" };
    await store.begin(input);
    const appended = await store.append(input.id, Buffer.from("x\ny\nz\n"), 3, [
      "\ud800",
      "\ud801",
      "\ufffd",
    ]);
    expect(appended).toBeUndefined();
    expect(await store.append(input.id, Buffer.from("w\n"), 1, ["\ud801"])).toBe(0);
  });
});
