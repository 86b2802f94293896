import { describe, expect, it } from "vitest";
import { InputFileUpload } from "./input-file-upload.js";

/** A store that keeps what is appended, and sees custom_ids as Redis' set would. */
function memoryStore() {
  const chunks: Buffer[] = [];
  const seen = new Set<string>();
  return {
    chunks,
    async append(_id: string, chunk: Uint8Array, _lines: number, ids: readonly string[] = []) {
      for (let k = 0; k < ids.length; k++) {
        if (seen.has(ids[k] ?? "")) return k;
        seen.add(ids[k] ?? "");
      }
      chunks.push(Buffer.from(chunk));
      return undefined;
    },
  };
}

const line = (k: number, pad = 0) =>
  JSON.stringify({
    custom_id: `c${k}`,
    method: "POST",
    url: "/v1/models/digits/predict",
    body: { features: [k], pad: "x".repeat(pad) },
  });
const limits = { maxBytes: 10_000_000, maxLines: 50_000, maxLineBytes: 100_000 };

async function uploaded(text: string, pieceBytes: number, limit = limits) {
  const store = memoryStore();
  const upload = new InputFileUpload(store, "f", "w", limit);
  const bytes = Buffer.from(text);
  for (let at = 0; at < bytes.length; at += pieceBytes)
    await upload.write(bytes.subarray(at, at + pieceBytes));
  await upload.end();
  return { store, upload };
}

describe("a batch input file as it uploads", () => {
  it("keeps the exact bytes in chunks of whole lines, however they arrive", async () => {
    const text = `${Array.from({ length: 3_000 }, (_, k) => line(k, 100)).join("\r\n")}\n\n`;
    for (const piece of [1_000, 65_536, 1_000_000]) {
      const { store, upload } = await uploaded(text, piece);
      expect(Buffer.concat(store.chunks).toString()).toBe(text);
      expect(store.chunks.length).toBeGreaterThan(1);
      for (const chunk of store.chunks) expect(chunk.at(-1)).toBe(0x0a);
      expect(upload.lines).toBe(3_000);
      expect([...upload.urls]).toEqual(["/v1/models/digits/predict"]);
    }
  });

  it("closes a chunk at 256 KiB once it holds 256 lines, and at 1 MiB whatever it holds", async () => {
    const linesOf = (chunk: Buffer) => chunk.toString().split("\n").length - 1;
    // ~4 KB lines (MNIST's width): 256 of them to a chunk, not 64
    const wide = `${Array.from({ length: 1_000 }, (_, k) => line(k, 4_000)).join("\n")}\n`;
    const { store: wideStore } = await uploaded(wide, 65_536);
    expect(wideStore.chunks.slice(0, -1).map(linesOf)).toEqual([256, 256, 256]);
    // ~300 KB lines: a chunk at 1 MiB, four lines
    const huge = `${Array.from({ length: 10 }, (_, k) => line(k, 300_000)).join("\n")}\n`;
    const { store: hugeStore } = await uploaded(huge, 65_536, { ...limits, maxLineBytes: 400_000 });
    expect(hugeStore.chunks.slice(0, -1).map(linesOf)).toEqual([4, 4]);
    // ~200-byte lines: at 256 KiB
    const narrow = `${Array.from({ length: 3_000 }, (_, k) => line(k, 100)).join("\n")}\n`;
    const { store: narrowStore } = await uploaded(narrow, 65_536);
    for (const chunk of narrowStore.chunks.slice(0, -1)) {
      expect(chunk.byteLength).toBeGreaterThanOrEqual(256 * 1024);
      expect(chunk.byteLength).toBeLessThan(256 * 1024 + 300);
    }
  });

  it("takes a last line without its newline, and a byte order mark before the first", async () => {
    const text = `\ufeff${line(1)}\n${line(2)}`;
    const { store, upload } = await uploaded(text, 7);
    expect(Buffer.concat(store.chunks).toString()).toBe(text);
    expect(upload.lines).toBe(2);
  });

  it("refuses a repeated custom_id, a bad line, and each limit, naming the line", async () => {
    await expect(uploaded(`${line(1)}\n\n${line(1)}\n`, 10)).rejects.toThrow(
      /line 3 has custom_id "c1"/,
    );
    await expect(uploaded(`${line(1)}\n{"custom_id":"x"}\n`, 10)).rejects.toThrow(
      /line 2 needs method "POST"/,
    );
    const many = `${Array.from({ length: 11 }, (_, k) => line(k)).join("\n")}\n`;
    await expect(uploaded(many, 50, { ...limits, maxLines: 10 })).rejects.toThrow(
      /more than 10 lines/,
    );
    await expect(uploaded(many, 50, { ...limits, maxBytes: 500 })).rejects.toThrow(
      /exceeds 500 bytes/,
    );
    await expect(
      uploaded(`${line(1, 500)}\n`, 50, { ...limits, maxLineBytes: 300 }),
    ).rejects.toThrow(/line 1 exceeds 300 bytes/);
    await expect(uploaded("\n \n", 10)).rejects.toThrow(/no lines/);
  });

  it("checks a chunk while the one before is stored, stores one at a time in order, and stores nothing after a chunk that failed", async () => {
    // a store slow to answer: the upload must not run ahead of it, nor store out of order
    const stored: number[] = [];
    let storing = 0;
    let most = 0;
    let checks = 0;
    const store = {
      async append(_id: string, chunk: Uint8Array) {
        storing++;
        most = Math.max(most, storing);
        await new Promise((r) => setTimeout(r, 5));
        storing--;
        const first = JSON.parse(Buffer.from(chunk).toString().split("\n")[0] ?? "") as {
          custom_id: string;
        };
        stored.push(Number(first.custom_id.slice(1)));
        return undefined;
      },
    };
    const text = (bad?: number) =>
      `${Array.from({ length: 6_000 }, (_, k) => (k === bad ? '{"custom_id":"x"}' : line(k, 100))).join("\n")}\n`;
    const counting = async (bytes: Uint8Array, firstLine: number) => {
      checks++;
      const { checkInputLines } = await import("./input-lines.js");
      return checkInputLines(bytes, firstLine);
    };
    const upload = new InputFileUpload(store, "f", "w", limits, counting);
    const body = Buffer.from(text());
    for (let at = 0; at < body.length; at += 65_536)
      await upload.write(body.subarray(at, at + 65_536));
    await upload.end();
    expect(most).toBe(1);
    expect(stored.length).toBeGreaterThan(3);
    expect(stored).toEqual([...stored].sort((a, b) => a - b));
    expect(stored.length).toBe(checks);

    // a bad line in the second chunk: the first is stored, nothing after it
    stored.length = 0;
    const failing = new InputFileUpload(store, "g", "w", limits, counting);
    const bad = Buffer.from(text(2_000));
    const sent = (async () => {
      for (let at = 0; at < bad.length; at += 65_536)
        await failing.write(bad.subarray(at, at + 65_536));
      await failing.end();
    })();
    await expect(sent).rejects.toThrow(/line 2001 needs method "POST"/);
    await new Promise((r) => setTimeout(r, 50));
    expect(stored).toEqual([0]);
  });
});
