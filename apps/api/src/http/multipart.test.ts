import { describe, expect, it } from "vitest";
import { boundaryOf, type MultipartEvent, multipartEvents } from "./multipart.js";

/** A body's events, its data joined per part. */
async function parts(chunks: Uint8Array[], boundary: string) {
  async function* body() {
    yield* chunks;
  }
  const found: Array<{ name: string; filename: string | undefined; data: string }> = [];
  for await (const event of multipartEvents(body(), boundary) as AsyncGenerator<MultipartEvent>) {
    if (event.type === "part") found.push({ name: event.name, filename: event.filename, data: "" });
    else if (event.type === "data") {
      const last = found.at(-1);
      if (last) last.data += Buffer.from(event.data).toString();
    }
  }
  return found;
}

/** `text` cut into pieces of `size` bytes, as a socket might deliver it. */
const cut = (text: string, size: number) => {
  const bytes = Buffer.from(text);
  const pieces: Uint8Array[] = [];
  for (let at = 0; at < bytes.length; at += size) pieces.push(bytes.subarray(at, at + size));
  return pieces;
};

describe("multipart/form-data", () => {
  it("reads what fetch's FormData sends, whatever the chunking", async () => {
    const form = new FormData();
    const content = `${'{"custom_id":"a"}\n'.repeat(50)}last line\r\n--not-a-boundary`;
    form.append("file", new Blob([content]), "input.jsonl");
    form.append("purpose", "batch");
    const request = new Request("http://x/", { method: "POST", body: form });
    const boundary = boundaryOf(request.headers.get("content-type") ?? "");
    const text = await request.text();
    for (const size of [1, 7, 64, 100_000]) {
      expect(await parts(cut(text, size), boundary)).toEqual([
        { name: "file", filename: "input.jsonl", data: content },
        { name: "purpose", filename: undefined, data: "batch" },
      ]);
    }
  });

  it("refuses a body that is not multipart, or that ends early", async () => {
    expect(() => boundaryOf("application/json")).toThrow(/multipart\/form-data/);
    const early = '--b\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\nabc';
    await expect(parts(cut(early, 5), "b")).rejects.toThrow(/before its closing boundary/);
  });

  it("drops what follows the closing boundary as it comes: 128 MB of it cost nothing", async () => {
    const body = '--b\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--b--\r\n';
    const junk = new Uint8Array(32 * 1024).fill(0x78);
    // kept, each of its 4,096 chunks had copied all before it again (~270 GB in all)
    const chunks = [Buffer.from(body), ...Array.from({ length: 4_096 }, () => junk)];
    const started = performance.now();
    expect(await parts(chunks, "b")).toEqual([
      { name: "purpose", filename: undefined, data: "batch" },
    ]);
    expect(performance.now() - started).toBeLessThan(2_000);
  });
});
