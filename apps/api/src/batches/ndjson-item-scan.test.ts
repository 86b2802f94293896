import { describe, expect, it } from "vitest";
import {
  againstJsonParse,
  BAD_NUMBER_LISTS,
  brokenLines,
  notUtf8,
} from "../parsing/damaged-lines.js";
import type { ScannedValues } from "../parsing/json-line-reader.js";
import { NdjsonItemScanner } from "./ndjson-item-scan.js";

const scanner = new NdjsonItemScanner();

/** The scanner's reading of `text`, or undefined where it leaves the line to JSON.parse. */
function scan(text: string | Uint8Array) {
  const bytes = typeof text === "string" ? Buffer.from(text) : text;
  const out: ScannedValues = { values: new Float32Array(bytes.length + 1), length: 0 };
  const item = scanner.scan(bytes, 0, bytes.length, out);
  if (!item) {
    expect(out.length).toBe(0);
    return undefined;
  }
  return { key: item.key, features: [...out.values.subarray(0, out.length)] };
}

/** JSON.parse's reading of the same line when it is an item of exactly those two keys. */
function parsed(text: string | Uint8Array) {
  let value: unknown;
  try {
    const decoded =
      typeof text === "string"
        ? text
        : new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(text);
    value = JSON.parse(decoded);
  } catch {
    return undefined;
  }
  const { key, features } = (value ?? {}) as Record<string, unknown>;
  if (
    Object.keys(value ?? {})
      .sort()
      .join() !== "features,key"
  )
    return undefined;
  if (typeof key !== "string" || !Array.isArray(features)) return undefined;
  return { key, features: features.map(Math.fround) };
}

const item = (features: string, extra = "") => `{"key":"r1","features":[${features}]${extra}}`;

describe("NdjsonItemScanner", () => {
  it("reads an item as JSON.parse does, whitespace and key order included", () => {
    for (const text of [
      item("0,16,255,3"),
      item("7 ,10, 255,1000,0,99,12345"),
      item("0.082,-0,1e3,2.5E-3,-7,123456789012345,1.7976931348623157e-308"),
      ` { "features" : [ 1 , 2 ] ,\t"key" : "é😀"}\r`,
      item("1").replace('"r1"', '"\ufeffr1"'),
      item("0.1000000000000000055511151231257827,9007199254740993,1e-400,3.4e38"),
      // as many as a line may read from their text, among short ones
      item(
        Array.from({ length: 32 }, (_, k) => (k % 2 ? "1" : `0.1234567890123456${k % 10}`)).join(
          ",",
        ),
      ),
      '{"key":"","features":[1]}',
    ]) {
      expect(scan(text), text).toEqual(parsed(text));
    }
  });

  it("leaves to JSON.parse what it does not read exactly as JSON.parse would", () => {
    for (const text of [
      // JSON.parse accepts these: an escape, a key twice, another key, a number past FP32, no
      // features, a key that is not a string, a byte order mark, whitespace JSON does not know
      item("1").replace('"r1"', '"r\\u0031"'),
      item("1", ',"key":"r2"'),
      item("1", ',"x":1'),
      item("1e39"),
      item(""),
      '{"key":1,"features":[1]}',
      '{"features":[1]}',
      `\ufeff${item("1")}`,
      `\u00a0${item("1")}`,
      // more numbers than a line may read from their text (JSON.parse reads those for less)
      item(Array.from({ length: 17 }, (_, k) => `0.1234567890123456${k % 10}`).join(",")),
      // JSON.parse refuses these
      ...BAD_NUMBER_LISTS.map((features) => item(features)),
      ...brokenLines(item("1")),
    ]) {
      expect(scan(text), text).toBeUndefined();
    }
    expect(scan(notUtf8(item("1")))).toBeUndefined();
  });

  it("never reads a damaged item JSON.parse refuses, nor reads one differently (fuzzed)", () => {
    const alphabet = Buffer.from('{}[],:"\\ -+.eE0123456789afkyst\t\r\u00ff');
    const base = Buffer.from(item("0,1.5,-2e-3,255,16,0.25,1e22,3"));
    const { taken, misread } = againstJsonParse(scan, parsed, base, alphabet, 11);
    expect(misread).toEqual([]);
    // the fuzz reached lines the scanner reads, not only ones it leaves alone
    expect(taken).toBeGreaterThan(1_000);
  });
});
