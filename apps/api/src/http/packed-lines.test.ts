import { describe, expect, it } from "vitest";
import { checkInputLines } from "../files/input-lines.js";
import {
  joinPacked,
  type PackedChunk,
  packLines as packValues,
  plainFeatures,
  readPacked,
} from "./packed-lines.js";

const PREDICT = "/v1/models/digits/predict";

/** Chunks' packed lines read back, values and all, their rows read from `chunks`. */
function unpack(chunks: PackedChunk[]) {
  return joinPacked(
    chunks.map((chunk) => readPacked(chunk.head)),
    { file: "file-a", chunks: chunks.map((_, k) => k) },
    async (source) => source.chunks.map((k) => chunks[k]?.rows ?? null),
  );
}

const valuesOf = async (chunks: PackedChunk[]) => [...(await unpack(chunks).values())];

/** packLines of rows as arrays (the upload writes them into one FP32 array as it reads). */
const packLines = (customIds: string[], urls: string[], rows: number[][], limit: number) =>
  packValues(
    customIds,
    urls,
    Float32Array.from(rows.flat()),
    rows.map((row) => row.length),
    limit,
  ) as PackedChunk;

describe("packed lines", () => {
  it("takes a predict body of features alone, each a number FP32 holds; nothing else", () => {
    expect(plainFeatures(PREDICT, { features: [0, 1.5, -3] })).toEqual([0, 1.5, -3]);
    expect(plainFeatures(PREDICT, { features: [1], timeout_ms: 5 })).toBeUndefined();
    expect(plainFeatures(PREDICT, { features: [] })).toBeUndefined();
    expect(plainFeatures(PREDICT, { features: [1, "2"] })).toBeUndefined();
    expect(plainFeatures(PREDICT, { features: [1e39] })).toBeUndefined();
    expect(plainFeatures("/v1/embeddings", { features: [1] })).toBeUndefined();
  });

  it("reads back what it packed: bytes for whole pixels, FP32 else, urls a table", async () => {
    for (const features of [
      [
        [0, 16, 255],
        [3, 4],
      ],
      [
        [0.5, -1],
        [1e-7, 3, 7],
      ],
    ]) {
      const urls = [PREDICT, "/v1/models/mnist/predict"];
      const packed = packLines(["a", "b"], urls, features, 1 << 20);
      const back = unpack([packed]);
      expect(back.customIds).toEqual(["a", "b"]);
      expect(back.urls).toEqual(urls);
      expect([...back.widths]).toEqual(features.map((row) => row.length));
      expect([...(await back.values())]).toEqual(features.flat().map(Math.fround));
    }
    // whole pixels a byte each (five in 8 bytes and a count), FP32 where that is no larger
    const pack = (last: number) =>
      packLines(
        ["a", "b"],
        [PREDICT, PREDICT],
        [
          [0, 16, 255],
          [3, last],
        ],
        1 << 20,
      );
    const small = pack(4);
    expect(small.rows.byteLength + 8).toBe(pack(4.5).rows.byteLength);
    // pixels with a few values apart: a byte each, the others listed with their places
    const row = Array.from({ length: 64 }, (_, k) => (k === 9 ? 7.25 : k === 40 ? -1 : k % 17));
    const mostly = packLines(["a"], [PREDICT], [row], 1 << 20);
    expect(mostly.rows.byteLength).toBeLessThan(64 * 4);
    expect(await valuesOf([mostly])).toEqual(row);
    // unaligned copies (Redis replies' views) read the same
    const unaligned = (bytes: Uint8Array) => {
      const shifted = new Uint8Array(bytes.byteLength + 1);
      shifted.set(bytes, 1);
      return shifted.subarray(1);
    };
    const moved = { rows: unaligned(small.rows), head: unaligned(small.head) };
    expect(await valuesOf([moved])).toEqual(await valuesOf([small]));
    expect(unpack([moved]).customIds).toEqual(["a", "b"]);
  });

  it("packs nothing larger than its limit, its head and rows together", () => {
    expect(packLines(["a"], [PREDICT], [[0.1, 0.2]], 10)).toBeUndefined();
    const fits = packLines(["a"], [PREDICT], [[0.1, 0.2]], 1 << 20);
    const both = fits.rows.byteLength + fits.head.byteLength;
    expect(packLines(["a"], [PREDICT], [[0.1, 0.2]], both)).toBeDefined();
    expect(packLines(["a"], [PREDICT], [[0.1, 0.2]], both - 1)).toBeUndefined();
  });

  it("joins chunks' packed lines in order, each chunk's values decoded where they go", async () => {
    // bytes for whole pixels with one value apart, then FP32 throughout
    const one = packLines(["a"], [PREDICT], [[1, 2, 0.5, 7]], 1 << 20);
    const two = packLines(["b", "c"], [PREDICT, PREDICT], [[3.25], [4.5, 5]], 1 << 20);
    const joined = unpack([one, two, one]);
    expect(joined.customIds).toEqual(["a", "b", "c", "a"]);
    expect([...joined.widths]).toEqual([4, 1, 2, 4]);
    expect(joined.source).toEqual({ file: "file-a", chunks: [0, 1, 2] });
    expect([...(await joined.values())]).toEqual([1, 2, 0.5, 7, 3.25, 4.5, 5, 1, 2, 0.5, 7]);
  });

  it("says which chunk's rows are gone, or hold other than their head's count", async () => {
    const one = packLines(["a"], [PREDICT], [[1, 2]], 1 << 20);
    const two = packLines(["b"], [PREDICT], [[3, 4, 5]], 1 << 20);
    const gone = joinPacked(
      [readPacked(one.head), readPacked(two.head)],
      { file: "file-a", chunks: [4, 9] },
      async () => [one.rows, null],
    );
    await expect(gone.values()).rejects.toThrow(
      /input file file-a was deleted before this line ran \(its rows in chunk 9 are gone\)/,
    );
    const swapped = joinPacked(
      [readPacked(one.head), readPacked(two.head)],
      { file: "file-a", chunks: [4, 9] },
      async () => [two.rows, one.rows],
    );
    await expect(swapped.values()).rejects.toThrow(/chunk 4 holds 3 values for 2/);
  });

  it("a checked chunk is packed only when every line is a plain predict line", () => {
    const line = (k: number, body: object, url = PREDICT) =>
      JSON.stringify({ custom_id: `c${k}`, method: "POST", url, body });
    const plain = [line(1, { features: [1, 2] }), "", line(2, { features: [3, 4] })].join("\n");
    const checked = checkInputLines(new TextEncoder().encode(plain), 1);
    expect(readPacked((checked.packed as PackedChunk).head).customIds).toEqual(["c1", "c2"]);
    // the rows and the head are views of one buffer: the parse thread moves it whole
    expect(checked.packed?.rows.buffer).toBe(checked.packed?.head.buffer);
    const mixed = [line(1, { features: [1, 2] }), line(2, { features: [3], cache: false })].join(
      "\n",
    );
    expect(checkInputLines(new TextEncoder().encode(mixed), 1).packed).toBeUndefined();
    const chat = line(1, { messages: [] }, "/v1/chat/completions");
    expect(checkInputLines(new TextEncoder().encode(chat), 1).packed).toBeUndefined();
  });

  it("refuses rows packed in an encoding it does not know, rather than read them as FP32", async () => {
    const packed = packLines(["a"], [PREDICT], [[0, 16, 255]], 1_000_000);
    const unknown = new Uint8Array(packed.rows);
    new Uint32Array(unknown.buffer, 0, 1)[0] = 7;
    await expect(valuesOf([{ rows: unknown, head: packed.head }])).rejects.toThrow(
      /unknown packed values 7/,
    );
    expect(await valuesOf([packed])).toEqual([0, 16, 255]);
  });
});
