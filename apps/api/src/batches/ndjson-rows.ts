import { isUtf8 } from "node:buffer";
import { bytesPerElement, type Datatype, FP32_MAX, tensorToBytes } from "@ferry/protocol";
import { characters } from "../http/characters.js";
import type { ScannedValues } from "../parsing/json-line-reader.js";
import { NdjsonItemScanner } from "./ndjson-item-scan.js";

/** What a batch's rows must be: the model's one input, `width` values of `datatype` each. */
export interface RowsSpec {
  width: number;
  datatype: Datatype;
}

/**
 * Characters of an item's key (OpenAI's custom_id is as long): a key is stored with its answer
 * and again in the model's predictions by key, and a 100 KB key made a 500-line batch 100 MB.
 */
export const MAX_ITEM_KEY_CHARS = 512;

/** What is wrong with an item's key, or undefined when it is one. */
export function keyProblem(key: unknown): string | undefined {
  if (typeof key !== "string" || key === "") return "needs a string key";
  // characters as a custom_id's are counted (code points), not UTF-16 units
  const chars = characters(key, MAX_ITEM_KEY_CHARS);
  if (chars > MAX_ITEM_KEY_CHARS)
    return `has a key of ${chars} characters; at most ${MAX_ITEM_KEY_CHARS}`;
  return undefined;
}

/** Why a segment's parse stopped, counted within the segment (1-based). */
export interface RowsProblem {
  /** "json": line `at` is not JSON; "item": item `at` breaks `message`; "value": as said. */
  kind: "json" | "item" | "value";
  at: number;
  message: string;
}

/** A segment of NDJSON lines as a chunk takes them: keys, and the rows packed back to back. */
export interface ParsedRows {
  keys: string[];
  /** `keys.length` rows of `width * bytesPerElement[datatype]` bytes each. */
  rows: Uint8Array;
  /** Lines read (blank ones included), and items among them, up to the problem if any. */
  lines: number;
  items: number;
  problem?: RowsProblem;
}

// strict: bytes that are not UTF-8 are refused, as an input file's are (turned into U+FFFD,
// two keys that differ only there were one, their answers under one key twice)
const decoder = new TextDecoder("utf-8", { fatal: true });
const scanner = new NdjsonItemScanner();
const NEWLINE = 0x0a;

/**
 * Parses whole NDJSON lines of `{"key": "...", "features": [...]}` into packed rows, checking
 * each item as a batch's items are checked (a non-empty string key, `width` finite numbers
 * the datatype holds); stops at the first problem, keeping the rows before it. The rows are
 * written into one buffer of their own (sized by the segment's lines), ready to move to
 * another thread.
 */
export function parseRows(bytes: Uint8Array, spec: RowsSpec): ParsedRows {
  if (!isUtf8(bytes)) return upToBadBytes(bytes, spec);
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const rowBytes = spec.width * bytesPerElement[spec.datatype];
  // rows the segment can hold at most: one a line, and no item is shorter than its features
  // written one digit and a comma each (blank lines take no room)
  let lines = 1;
  for (let at = buf.indexOf(NEWLINE); at >= 0; at = buf.indexOf(NEWLINE, at + 1)) lines++;
  const capacity = Math.min(lines, Math.floor(bytes.byteLength / (2 * spec.width + 20)) + 1);
  const buffer = new ArrayBuffer(capacity * rowBytes);
  const out = new Uint8Array(buffer);
  const fp32 = spec.datatype === "FP32" ? new Float32Array(buffer) : undefined;
  // FP32 (the common case): an item read from its bytes, its features written in place
  const scanned: ScannedValues | undefined = fp32 ? { values: fp32, length: 0 } : undefined;
  const keys: string[] = [];
  let read = 0;
  let items = 0;
  const done = (problem?: RowsProblem): ParsedRows => ({
    keys,
    rows: out.subarray(0, keys.length * rowBytes),
    lines: read,
    items,
    ...(problem ? { problem } : {}),
  });
  // a byte order mark opening the segment is not its text's (the decoder this replaced dropped it)
  let start = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
  while (start < bytes.length) {
    let end = buf.indexOf(NEWLINE, start);
    if (end < 0) end = bytes.length;
    const from = start;
    start = end + 1;
    read++;
    if (end === from) {
      // blank lines, counted here rather than found one native call each (a MiB of them had
      // cost twice what decoding them did)
      while (start < bytes.length && bytes[start] === NEWLINE) {
        start++;
        read++;
      }
      continue;
    }
    // a line of spaces, tabs or CRs (a blank line of a file saved with CRLF): blank, as trim()
    // makes it, without scanning, decoding and trimming it (~4x what the decoder had cost)
    if (asciiBlank(bytes, from, end)) continue;
    if (scanned) {
      scanned.length = keys.length * spec.width;
      const item = scanner.scan(bytes, from, end, scanned);
      if (item !== undefined && item.width === spec.width) {
        items++;
        const bad = keyProblem(item.key);
        if (bad !== undefined) return done({ kind: "item", at: items, message: bad });
        keys.push(item.key);
        continue;
      }
    }
    // anything else as JSON.parse reads it (the segment is UTF-8, checked above)
    const line = buf.toString("utf8", from, end).trim();
    if (!line) continue;
    let raw: { key?: unknown; features?: unknown };
    try {
      raw = JSON.parse(line) as typeof raw;
    } catch {
      return done({ kind: "json", at: read, message: "is not valid JSON" });
    }
    items++;
    const features = raw?.features;
    const bad = keyProblem(raw?.key);
    if (bad !== undefined) return done({ kind: "item", at: items, message: bad });
    const key = raw.key as string;
    if (!Array.isArray(features) || features.length !== spec.width)
      return done({ kind: "item", at: items, message: `needs ${spec.width} finite features` });
    const row = keys.length;
    // FP32 (the common case): checked and written in place in one pass; anything it does
    // not take goes the general way below, which says why
    if (fp32 && writeFp32(features, fp32, row * spec.width)) {
      keys.push(key);
      continue;
    }
    if (!features.every((x) => typeof x === "number" && Number.isFinite(x)))
      return done({ kind: "item", at: items, message: `needs ${spec.width} finite features` });
    try {
      out.set(tensorToBytes(spec.datatype, features as number[]), row * rowBytes);
    } catch (err) {
      return done({ kind: "value", at: items, message: (err as Error).message });
    }
    keys.push(key);
  }
  return done();
}

/** Whether bytes[from, end) are only the one-byte whitespace `trim()` removes. */
function asciiBlank(bytes: Uint8Array, from: number, end: number): boolean {
  for (let i = from; i < end; i++) {
    const c = bytes[i];
    if (c !== 0x20 && c !== 0x09 && c !== 0x0d && c !== 0x0b && c !== 0x0c) return false;
  }
  return true;
}

/** Writes `values` at `at` when every one is a number FP32 holds; false (nothing kept) if not. */
function writeFp32(values: unknown[], into: Float32Array, at: number): boolean {
  for (let k = 0; k < values.length; k++) {
    const v = values[k];
    if (typeof v !== "number" || !(Math.abs(v) <= FP32_MAX)) return false;
    into[at + k] = v;
  }
  return true;
}

/** A segment that is not all UTF-8: the rows of its lines before the first that is not, then that line's problem. */
function upToBadBytes(bytes: Uint8Array, spec: RowsSpec): ParsedRows {
  let start = 0;
  for (let line = 1; ; line++) {
    const newline = bytes.indexOf(0x0a, start);
    const end = newline < 0 ? bytes.length : newline;
    try {
      decoder.decode(bytes.subarray(start, end));
    } catch {
      const before = start === 0 ? undefined : parseRows(bytes.subarray(0, start - 1), spec);
      if (before?.problem) return before;
      return {
        keys: before?.keys ?? [],
        rows: before?.rows ?? new Uint8Array(0),
        lines: line,
        items: before?.items ?? 0,
        problem: { kind: "json", at: line, message: "is not UTF-8" },
      };
    }
    if (newline < 0) throw new Error("a segment that is not UTF-8 has every line UTF-8");
    start = newline + 1;
  }
}
