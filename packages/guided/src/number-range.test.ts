import { describe, expect, it } from "vitest";
import { type Bound, numberRange, SIGNIFICANT_DIGITS } from "./number-range.js";
import { spellingRegExp } from "./spelling.js";

/** A small seeded generator, so that a failure names the case that fails again. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** Whether `text` is a number the spelling should write: canonical, within 15 digits. */
function writable(text: string, integer: boolean): boolean {
  const m = /^(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?$/.exec(text);
  if (!m) return false;
  const [, sign, int = "", frac] = m;
  if (integer && frac !== undefined) return false;
  if (int.length > SIGNIFICANT_DIGITS) return false;
  if ((frac?.length ?? 0) > SIGNIFICANT_DIGITS - (int === "0" ? 0 : int.length)) return false;
  // "-0", "-0.0": negative zero is not written
  return !(sign === "-" && Number(text) === 0);
}

/** What ajv asks of the value: the double the client's JSON.parse reads, within the bounds. */
function within(value: number, low?: Bound, high?: Bound): boolean {
  if (low && (low.open ? value <= low.value : value < low.value)) return false;
  if (high && (high.open ? value >= high.value : value > high.value)) return false;
  return true;
}

/** Numbers near a bound, and far from it, as text: the places a spelling gets wrong. */
function candidates(next: () => number, bounds: number[]): string[] {
  const out = new Set<string>(["0", "-0", "-0.0", "0.0", "00", "01", "1e5", "1.", ".5", "-", ""]);
  const digits = (n: number) =>
    Array.from({ length: n }, () => String(Math.floor(next() * 10))).join("");
  for (const b of bounds) {
    const [int = "0", frac = ""] = Math.abs(b).toFixed(6).replace(/0+$/, "").split(".");
    for (const sign of ["", "-"])
      for (const di of [-1n, 0n, 1n]) {
        const i = BigInt(int) + di;
        if (i < 0n) continue;
        out.add(`${sign}${i}`);
        for (let cut = 0; cut <= frac.length + 1; cut++) {
          const head = frac.slice(0, cut);
          out.add(`${sign}${i}.${head || "0"}`);
          out.add(`${sign}${i}.${head}${digits(1)}`);
          out.add(`${sign}${i}.${head}${digits(1 + Math.floor(next() * 3))}`);
          out.add(`${sign}${i}.${head}0`);
        }
      }
  }
  for (let k = 0; k < 60; k++) {
    const sign = next() < 0.5 ? "-" : "";
    const int = String(BigInt(digits(1 + Math.floor(next() * 16))));
    out.add(`${sign}${int}`);
    out.add(`${sign}${int}.${digits(1 + Math.floor(next() * 16))}`);
  }
  return [...out].filter((c) => c.length > 0);
}

describe("a bounded number's spelling", () => {
  it("writes exactly the in-range numbers, on random bounds (integers and decimals, open and closed, one-sided)", () => {
    const next = random(43);
    const bound = (): Bound | undefined => {
      if (next() < 0.15) return undefined;
      const scale = [1, 10, 1000, 1e6, 1e14][Math.floor(next() * 5)] ?? 1;
      const places = Math.floor(next() * 4);
      const value = Number(((next() * 2 - 1) * scale).toFixed(places));
      return { value: Object.is(value, -0) ? 0 : value, open: next() < 0.4 };
    };
    let cases = 0;
    for (let round = 0; round < 400; round++) {
      const integer = next() < 0.4;
      let [low, high] = [bound(), bound()];
      if (low && high && low.value > high.value) [low, high] = [high, low];
      const spelling = numberRange(low, high, integer);
      const regex = spelling.length > 0 ? spellingRegExp(spelling) : /$^/;
      for (const text of candidates(
        next,
        [low?.value, high?.value, 0].filter((v) => v !== undefined),
      )) {
        const expected = writable(text, integer) && within(Number(text), low, high);
        expect(
          regex.test(text),
          `${text} in ${JSON.stringify({ low, high, integer })}: ${regex}`,
        ).toBe(expected);
        cases++;
      }
    }
    expect(cases).toBeGreaterThan(50_000);
  });

  it("spells the ranges zod writes", () => {
    const at = (low: Bound | undefined, high: Bound | undefined, integer = false) =>
      spellingRegExp(numberRange(low, high, integer));
    const probability = at({ value: 0, open: false }, { value: 1, open: false });
    for (const ok of ["0", "1", "0.5", "1.0", "0.999999999999999", "1.000"])
      expect(probability.test(ok), ok).toBe(true);
    for (const no of ["1.01", "-0.1", "2", "-0", "1e-3", "0.1234567890123456"])
      expect(probability.test(no), no).toBe(false);
    const positive = at({ value: 0, open: true }, undefined);
    expect(positive.test("0")).toBe(false);
    expect(positive.test("0.000")).toBe(false);
    expect(positive.test("0.001")).toBe(true);
    expect(positive.test("999999999999999")).toBe(true);
    expect(positive.test("1000000000000000")).toBe(false);
    const age = at({ value: 0, open: false }, { value: 120, open: false }, true);
    expect(age.test("120")).toBe(true);
    expect(age.test("121")).toBe(false);
    expect(age.test("129")).toBe(false);
    const latitude = at({ value: -90, open: false }, { value: 90, open: false });
    expect(latitude.test("-90")).toBe(true);
    expect(latitude.test("-90.0001")).toBe(false);
    expect(latitude.test("-12.3456789")).toBe(true);
    expect(numberRange({ value: 2, open: true }, { value: 2, open: false }, false)).toEqual([]);
    expect(numberRange({ value: 2.5, open: false }, { value: 2.9, open: false }, true)).toEqual([]);
  });
});
