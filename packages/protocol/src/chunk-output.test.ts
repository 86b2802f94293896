import { describe, expect, it } from "vitest";
import {
  chunkRowOffset,
  decodeChunkOutput,
  decodeRowPointer,
  encodeChunkOutput,
  encodeRowPointer,
  rowValues,
} from "./chunk-output.js";

describe("a chunk's packed answers", () => {
  it("round-trips, and a row read at its offset alone is the row", () => {
    const values = Float32Array.from({ length: 3 * 4 }, (_, k) => k / 7 - 0.5);
    const out = {
      width: 4,
      values,
      keys: ["a", "b", "ü-c"],
      model_version: "2",
      batch: "b1",
      errors: { 1: { code: "MODEL_ERROR", message: "row 1 failed" } },
    };
    const bytes = encodeChunkOutput(out);
    // as Redis hands it back: at an odd offset of a larger buffer
    const reply = Buffer.concat([Buffer.from([9]), bytes]).subarray(1);
    expect(decodeChunkOutput(reply)).toEqual(out);
    const at = chunkRowOffset(4, 2);
    expect(rowValues(bytes.subarray(at, at + 16))).toEqual(Array.from(values.subarray(8, 12)));
  });

  it("refuses values that do not fill its rows; a pointer round-trips", () => {
    expect(() =>
      encodeChunkOutput({
        width: 4,
        values: new Float32Array(5),
        keys: ["a"],
        model_version: "1",
        batch: "b",
        errors: {},
      }),
    ).toThrow(/5 values for 1 rows of 4/);
    const p = { batch: "b-1", chunk: 3, row: 2047, width: 10, model_version: "2" };
    expect(decodeRowPointer(encodeRowPointer(p))).toEqual(p);
    expect(decodeRowPointer("garbage")).toBeUndefined();
  });
});
