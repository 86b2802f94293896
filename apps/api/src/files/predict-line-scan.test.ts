import { describe, expect, it } from "vitest";
import {
  againstJsonParse,
  BAD_NUMBER_LISTS,
  brokenLines,
  notUtf8,
} from "../parsing/damaged-lines.js";
import { PredictLineScanner, type ScannedValues } from "./predict-line-scan.js";

const scanner = new PredictLineScanner();

/** The scanner's reading of `text`, or undefined where it leaves the line to JSON.parse. */
function scan(text: string | Uint8Array) {
  const bytes = typeof text === "string" ? Buffer.from(text) : text;
  const out: ScannedValues = { values: new Float32Array(bytes.length + 1), length: 0 };
  const line = scanner.scan(bytes, 0, bytes.length, out);
  if (!line) {
    expect(out.length).toBe(0);
    return undefined;
  }
  return { ...line, features: [...out.values.subarray(0, out.length)] };
}

/** JSON.parse's reading of the same line, in the scanner's terms; undefined if it is not one. */
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
  const { custom_id, method, url, body } = (value ?? {}) as Record<string, unknown>;
  const features = (body as { features?: unknown } | undefined)?.features;
  // the line's keys, and its body's, exactly those of a plain predict line
  if (
    Object.keys(value ?? {})
      .sort()
      .join() !== "body,custom_id,method,url" ||
    Object.keys(body ?? {}).join() !== "features"
  )
    return undefined;
  if (
    typeof custom_id !== "string" ||
    method !== "POST" ||
    typeof url !== "string" ||
    !Array.isArray(features)
  )
    return undefined;
  return { customId: custom_id, url, width: features.length, features: features.map(Math.fround) };
}

const line = (features: string, extra = "") =>
  `{"custom_id":"r1","method":"POST","url":"/v1/models/digits/predict","body":{"features":[${features}]}${extra}}`;

describe("PredictLineScanner", () => {
  it("reads a plain predict line as JSON.parse does, whitespace and key order included", () => {
    for (const text of [
      line("0,16,255,3"),
      line("7 ,10, 255,1000,0,99,12345"),
      line("0.082,-0,1e3,2.5E-3,-7,123456789012345,1.7976931348623157e-308"),
      ` { "url" : "/v1/models/mnist/predict" ,"body":{ "features" : [ 1 , 2 ] } ,\t"method":"POST","custom_id":"é😀"}\r`,
      // a byte order mark opening a string is the string's (the decoder would drop it)
      line("1").replace('"r1"', '"\ufeffr1"').replace('"/v1', '"\ufeff/v1'),
      line("0.1000000000000000055511151231257827,9007199254740993,1e-400,3.4e38"),
    ]) {
      expect(scan(text), text).toEqual(parsed(text));
    }
  });

  it("leaves to JSON.parse what it does not read exactly as JSON.parse would", () => {
    for (const text of [
      // JSON.parse accepts these: an escape, a key twice, another key, a number past FP32, no
      // features, a byte order mark
      line("1").replace('"r1"', '"r\\u0031"'),
      line("1").replace('"method":"POST"', '"method":"POST","method":"POST"'),
      line("1", ',"x":1'),
      line("1e39"),
      line(""),
      `\ufeff${line("1")}`,
      // JSON.parse refuses these
      ...BAD_NUMBER_LISTS.map((features) => line(features)),
      ...brokenLines(line("1")),
      line("1").replace('"POST"', '"GET"'),
    ]) {
      expect(scan(text), text).toBeUndefined();
    }
    // bytes that are not UTF-8 inside a string, or anywhere else
    expect(scan(notUtf8(line("1")))).toBeUndefined();
  });

  it("never reads a damaged line JSON.parse refuses, nor reads one differently (fuzzed)", () => {
    const alphabet = Buffer.from('{}[],:"\\ -+.eE0123456789abcfPOST\t\r\u00ff');
    const base = Buffer.from(line("0,1.5,-2e-3,255,16,0.25,1e22,3"));
    const { taken, misread } = againstJsonParse(scan, parsed, base, alphabet, 7);
    expect(misread).toEqual([]);
    // the fuzz reached lines the scanner reads, not only ones it leaves alone
    expect(taken).toBeGreaterThan(1_000);
  });
});
