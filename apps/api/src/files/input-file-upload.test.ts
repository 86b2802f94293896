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
  const upload = new InputFileUpload(store, "f", limit);
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
});
