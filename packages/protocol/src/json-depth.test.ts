import { describe, expect, it } from "vitest";
import { nestsWithin } from "./json-depth.js";

const nested = (levels: number, leaf: unknown = 1): unknown => {
  let value = leaf;
  for (let k = 0; k < levels; k++) value = k % 2 ? [value] : { a: value };
  return value;
};

describe("nestsWithin", () => {
  it("counts arrays and objects alike, leaves not at all", () => {
    expect(nestsWithin(1, 0)).toBe(true);
    expect(nestsWithin(nested(3), 3)).toBe(true);
    expect(nestsWithin(nested(4), 3)).toBe(false);
    expect(nestsWithin({ a: 1, b: [1, 2, { c: "x" }] }, 3)).toBe(true);
    expect(nestsWithin({ a: 1, b: [1, 2, { c: [] }] }, 3)).toBe(false);
  });

  it("counts entries in all where asked", () => {
    expect(nestsWithin({ a: [1, 2], b: { c: 3 } }, 64, 5)).toBe(true);
    expect(nestsWithin({ a: [1, 2], b: { c: 3 } }, 64, 4)).toBe(false);
  });

  it("walks a million levels without a stack of its own", () => {
    expect(nestsWithin(nested(1_000_000))).toBe(false);
    expect(nestsWithin(nested(64))).toBe(true);
    expect(nestsWithin(nested(65))).toBe(false);
  });
});
