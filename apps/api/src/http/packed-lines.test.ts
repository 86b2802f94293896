import { describe, expect, it } from "vitest";
import { checkInputLines } from "../files/input-lines.js";
import { joinPacked, packLines as packValues, plainFeatures, readPacked } from "./packed-lines.js";

const PREDICT = "/v1/models/digits/predict";

/** A packed chunk's lines read back, values and all. */
const unpackLines = (bytes: Uint8Array) => joinPacked([readPacked(bytes)]);

/** packLines of rows as arrays (the upload writes them into one FP32 array as it reads). */
const packLines = (customIds: string[], urls: string[], rows: number[][], limit: number) =>
  packValues(
    customIds,
    urls,
    Float32Array.from(rows.flat()),
    rows.map((row) => row.length),
    limit,
  );

describe("packed lines", () => {
  it("takes a predict body of features alone, each a number FP32 holds; nothing else", () => {
    expect(plainFeatures(PREDICT, { features: [0, 1.5, -3] })).toEqual([0, 1.5, -3]);
    expect(plainFeatures(PREDICT, { features: [1], timeout_ms: 5 })).toBeUndefined();
    expect(plainFeatures(PREDICT, { features: [] })).toBeUndefined();
    expect(plainFeatures(PREDICT, { features: [1, "2"] })).toBeUndefined();
    expect(plainFeatures(PREDICT, { features: [1e39] })).toBeUndefined();
    expect(plainFeatures("/v1/embeddings", { features: [1] })).toBeUndefined();
  });

  it("reads back what it packed: bytes for whole pixels, FP32 else, urls a table", () => {
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
      const packed = packLines(["a", "b"], urls, features, 1 << 20) as Uint8Array;
      const back = unpackLines(packed);
      expect(back.customIds).toEqual(["a", "b"]);
      expect(back.urls).toEqual(urls);
      expect([...back.widths]).toEqual(features.map((row) => row.length));
      expect([...back.values]).toEqual(features.flat().map(Math.fround));
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
      ) as Uint8Array;
    const small = pack(4);
    expect(small.byteLength + 8).toBe(pack(4.5).byteLength);
    // pixels with a few values apart: a byte each, the others listed with their places
    const row = Array.from({ length: 64 }, (_, k) => (k === 9 ? 7.25 : k === 40 ? -1 : k % 17));
    const mostly = packLines(["a"], [PREDICT], [row], 1 << 20) as Uint8Array;
    expect(mostly.byteLength).toBeLessThan(64 * 4);
    expect([...unpackLines(mostly).values]).toEqual(row);
    // an unaligned copy (a Redis reply's view) reads the same
    const shifted = new Uint8Array(small.byteLength + 1).fill(0);
    shifted.set(small, 1);
    expect(unpackLines(shifted.subarray(1)).values).toEqual(unpackLines(small).values);
  });

  it("packs nothing larger than its limit", () => {
    expect(packLines(["a"], [PREDICT], [[0.1, 0.2]], 10)).toBeUndefined();
  });

  it("joins chunks' packed lines in order, each chunk's values decoded where they go", () => {
    // bytes for whole pixels with one value apart, then FP32 throughout
    const one = readPacked(packLines(["a"], [PREDICT], [[1, 2, 0.5, 7]], 1 << 20) as Uint8Array);
    const two = readPacked(
      packLines(["b", "c"], [PREDICT, PREDICT], [[3.25], [4.5, 5]], 1 << 20) as Uint8Array,
    );
    const joined = joinPacked([one, two, one]);
    expect(joined.customIds).toEqual(["a", "b", "c", "a"]);
    expect([...joined.widths]).toEqual([4, 1, 2, 4]);
    expect([...joined.values]).toEqual([1, 2, 0.5, 7, 3.25, 4.5, 5, 1, 2, 0.5, 7]);
  });

  it("a checked chunk is packed only when every line is a plain predict line", () => {
    const line = (k: number, body: object, url = PREDICT) =>
      JSON.stringify({ custom_id: `c${k}`, method: "POST", url, body });
    const plain = [line(1, { features: [1, 2] }), "", line(2, { features: [3, 4] })].join("\n");
    const checked = checkInputLines(new TextEncoder().encode(plain), 1);
    expect(unpackLines(checked.packed as Uint8Array).customIds).toEqual(["c1", "c2"]);
    const mixed = [line(1, { features: [1, 2] }), line(2, { features: [3], cache: false })].join(
      "\n",
    );
    expect(checkInputLines(new TextEncoder().encode(mixed), 1).packed).toBeUndefined();
    const chat = line(1, { messages: [] }, "/v1/chat/completions");
    expect(checkInputLines(new TextEncoder().encode(chat), 1).packed).toBeUndefined();
  });

  it("refuses a chunk packed in an encoding it does not know, rather than read it as FP32", () => {
    const packed = packLines(["a"], [PREDICT], [[0, 16, 255]], 1_000_000) as Uint8Array;
    const unknown = new Uint8Array(packed);
    new Uint32Array(unknown.buffer, 4, 1)[0] = 7;
    expect(() => readPacked(unknown)).toThrow(/unknown packed values 7/);
    expect(readPacked(packed).customIds).toEqual(["a"]);
  });
});
