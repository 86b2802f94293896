import { describe, expect, it } from "vitest";
import { allFinite } from "./tensor-packing.js";

const fp32 = (...values: number[]) => new Uint8Array(Float32Array.from(values).buffer);

describe("allFinite", () => {
  it("finds a NaN or an infinity wherever the row's bytes sit", () => {
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      const row = fp32(0, 1.5, bad, -2);
      expect(allFinite(row)).toBe(false);
      // the same bytes one byte into a larger buffer: not 4-byte aligned
      const shifted = new Uint8Array(row.length + 1);
      shifted.set(row, 1);
      expect(allFinite(shifted.subarray(1))).toBe(false);
    }
    const good = fp32(0, 1.5, 3.4e38, -2);
    const shifted = new Uint8Array(good.length + 3);
    shifted.set(good, 3);
    expect(allFinite(good)).toBe(true);
    expect(allFinite(shifted.subarray(3))).toBe(true);
    // a view into the middle of a larger, aligned buffer reads only its own values
    const wide = new Uint8Array(fp32(Number.NaN, 1, 2, Number.NaN).buffer, 4, 8);
    expect(allFinite(wide)).toBe(true);
  });
});
