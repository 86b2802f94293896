import {
  decodeValues,
  FP32_MAX,
  type PackedValues,
  packedLength,
  packValues,
} from "@ferry/protocol";
import { endpointOf } from "./batch-endpoints.js";

/**
 * Predict lines of a batch input file's chunk as the upload's check already parsed them,
 * packed beside the chunk, so that a batch that runs them reads their rows instead of parsing
 * every line again (on the offline path a line's second parse cost as much as its row's run).
 * Only a chunk whose every line is a predict line with a body of `features` alone, each a
 * number FP32 holds, is packed (anything else a run parses as the route would), and only when
 * the rows take no more room than the lines they come from: a file's packed rows are at most
 * its own size again, kept and gone with it. Values that are whole numbers 0-255 (pixels: the
 * digits and MNIST files people have) take a byte each, the rest listed apart as FP32 (where
 * they are few), else every value takes FP32's four bytes (`packValues`' block):
 *
 *   u32 lines | u32 encoding | u32 x lines widths | the values' block
 *   | JSON {customIds, urls (each once), url (each line's, as its place in urls)}
 */

/** A predict line's features, when its body is only them, each a number FP32 holds. */
export function plainFeatures(url: string, body: unknown): number[] | undefined {
  if (endpointOf(url)?.endpoint !== "/v1/models/{model}/predict") return undefined;
  if (body === null || typeof body !== "object") return undefined;
  const keys = Object.keys(body);
  if (keys.length !== 1 || keys[0] !== "features") return undefined;
  const features = (body as { features: unknown }).features;
  if (!Array.isArray(features) || features.length === 0) return undefined;
  for (let k = 0; k < features.length; k++) {
    const v: unknown = features[k];
    if (typeof v !== "number" || !(Math.abs(v) <= FP32_MAX)) return undefined;
  }
  return features as number[];
}

/**
 * A chunk's lines packed: their ids, urls and features (`values`, rows back to back, row r
 * `widths[r]` long); undefined if larger than `limit`.
 */
export function packLines(
  customIds: readonly string[],
  urls: readonly string[],
  values: Float32Array,
  widths: readonly number[],
  limit: number,
): Uint8Array | undefined {
  const n = widths.length;
  const block = packValues(values);
  // urls as a table and an index a line: a file's lines name a few at most
  const table = [...new Set(urls)];
  const place = new Map(table.map((url, k) => [url, k]));
  const meta = Buffer.from(
    JSON.stringify({ customIds, urls: table, url: urls.map((u) => place.get(u)) }),
  );
  const start = 8 + 4 * n;
  const size = start + block.bytes.byteLength + meta.byteLength;
  if (size > limit) return undefined;
  const packed = new Uint8Array(size);
  const head = new Uint32Array(packed.buffer, 0, 2 + n);
  head[0] = n;
  head[1] = block.encoding;
  head.set(widths, 2);
  packed.set(block.bytes, start);
  packed.set(meta, start + block.bytes.byteLength);
  return packed;
}

/** A packed chunk's lines, read back. */
export interface PackedLines {
  customIds: string[];
  urls: string[];
  /** Each line's number of features; line r's start where the widths before it end. */
  widths: Uint32Array;
  /** Every line's values, back to back (decoded when first read). */
  readonly values: Float32Array;
  /** The same values as the upload packed them, chunk by chunk. */
  blocks: readonly PackedValues[];
}

/**
 * A packed chunk's lines read back but for their values, left packed as they lie (a view of
 * the reply): `joinPacked` decodes them straight into the rows of the chunks run together
 * (each chunk's own FP32 array, then their join, were two copies of every row on the API's
 * loop), or they go to the worker packed (`encodeBlocks`).
 */
export interface PackedChunkLines {
  customIds: string[];
  urls: string[];
  widths: Uint32Array;
  block: PackedValues;
}

export function readPacked(bytes: Uint8Array): PackedChunkLines {
  // typed arrays need 4-byte alignment: a reply that lacks it is copied out (a large one
  // comes in a buffer of its own, aligned)
  const own = bytes.byteOffset % 4 === 0 ? bytes : new Uint8Array(bytes);
  const { buffer, byteOffset: base } = own;
  const [n = 0, encoding = 0] = new Uint32Array(buffer, base, 2);
  const widths = new Uint32Array(buffer, base + 8, n);
  let count = 0;
  for (const w of widths) count += w;
  const start = base + 8 + 4 * n;
  const length = packedLength(
    encoding,
    count,
    new Uint8Array(buffer, start, base + own.byteLength - start),
  );
  const block = { encoding, count, bytes: new Uint8Array(buffer, start, length) };
  const end = start + length;
  const meta = JSON.parse(
    Buffer.from(buffer, end, base + own.byteLength - end).toString("utf8"),
  ) as { customIds: string[]; urls: string[]; url: number[] };
  const urls = meta.url.map((k) => meta.urls[k] ?? "");
  return { customIds: meta.customIds, urls, widths, block };
}

/**
 * Packed lines of several chunks as one, in order: their values decoded once, into one array,
 * when first asked for (`values`); until then, as the chunks' blocks.
 */
export function joinPacked(parts: readonly PackedChunkLines[]): PackedLines {
  let lines = 0;
  let count = 0;
  for (const part of parts) {
    lines += part.widths.length;
    count += part.block.count;
  }
  const widths = new Uint32Array(lines);
  const customIds: string[] = [];
  const urls: string[] = [];
  let line = 0;
  for (const part of parts) {
    widths.set(part.widths, line);
    line += part.widths.length;
    for (const id of part.customIds) customIds.push(id);
    for (const url of part.urls) urls.push(url);
  }
  const blocks = parts.map((part) => part.block);
  let decoded: Float32Array | undefined;
  return {
    customIds,
    urls,
    widths,
    blocks,
    get values() {
      if (!decoded) {
        decoded = new Float32Array(count);
        let at = 0;
        for (const block of blocks) {
          decodeValues(block, decoded, at);
          at += block.count;
        }
      }
      return decoded;
    },
  };
}
