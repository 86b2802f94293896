import { FerryError } from "@ferry/protocol";
import { describe, expect, it } from "vitest";
import { ndjsonSegments } from "./batch-job-service.js";
import { parseRows } from "./ndjson-rows.js";

const limits = { maxBodyBytes: 64 * 1024 * 1024, maxLineBytes: 4096 };
const encoder = new TextEncoder();
const decoder = new TextDecoder();

async function* pieces(text: string, sizes: number[]): AsyncGenerator<Uint8Array> {
  const bytes = encoder.encode(text);
  for (let at = 0, k = 0; at < bytes.length; k++) {
    const size = sizes[k % sizes.length] ?? 1;
    yield bytes.subarray(at, at + size);
    at += size;
  }
}

async function collect(source: AsyncIterable<Uint8Array>): Promise<Uint8Array[]> {
  const out: Uint8Array[] = [];
  for await (const segment of source) out.push(segment);
  return out;
}

const line = (k: number) => JSON.stringify({ key: `k${k}`, features: [k, k + 0.5, -k] });

describe("ndjsonSegments", () => {
  it("cuts a body however it arrives into segments of whole lines that join back to it", async () => {
    // 3 MB of lines: several segments; pieces of odd sizes split lines and characters
    const text = `${Array.from({ length: 60_000 }, (_, k) => `${line(k)} é`).join("\n")}\nlast`;
    for (const sizes of [[65_536], [7, 1_000_003, 13]]) {
      const segments = await collect(ndjsonSegments(pieces(text, sizes), limits));
      expect(segments.length).toBeGreaterThan(1);
      for (const s of segments.slice(0, -1)) expect(s.at(-1)).toBe(0x0a);
      // each segment owns its buffer whole: it can move to another thread
      for (const s of segments)
        expect(s.byteOffset === 0 && s.buffer.byteLength === s.byteLength).toBe(true);
      expect(segments.map((s) => decoder.decode(s)).join("")).toBe(text);
    }
    // a byte at a time
    const small = `${line(1)}\n${line(2)}\n`;
    expect(
      (await collect(ndjsonSegments(pieces(small, [1]), limits)))
        .map((s) => decoder.decode(s))
        .join(""),
    ).toBe(small);
  });

  it("refuses a line past its limit as it crosses it, never reading the rest of the body", async () => {
    let read = 0;
    async function* endless(): AsyncGenerator<Uint8Array> {
      const piece = new Uint8Array(1024).fill(0x61);
      for (;;) {
        read += piece.byteLength;
        yield piece;
      }
    }
    const err = await collect(ndjsonSegments(endless(), limits)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FerryError);
    expect((err as FerryError).code).toBe("PAYLOAD_TOO_LARGE");
    expect((err as FerryError).message).toMatch(/line 1 exceeds 4096 bytes/);
    expect(read).toBeLessThanOrEqual(5 * 1024);
    const body = await collect(
      ndjsonSegments(pieces(`${line(1)}\n`.repeat(100), [50]), { ...limits, maxBodyBytes: 1000 }),
    ).catch((e: unknown) => e);
    expect((body as FerryError).message).toMatch(/NDJSON body exceeds 1000 bytes/);
  });
});

describe("parseRows", () => {
  const spec = { width: 3, datatype: "FP32" as const };

  it("packs each item's features after one another and counts blank lines", () => {
    const parsed = parseRows(encoder.encode(`${line(1)}\n\n${line(2)}\n`), spec);
    expect(parsed).toMatchObject({ keys: ["k1", "k2"], lines: 3, items: 2 });
    expect(parsed.problem).toBeUndefined();
    expect([...new Float32Array(Uint8Array.from(parsed.rows).buffer)]).toEqual([
      1, 1.5, -1, 2, 2.5, -2,
    ]);
  });

  it("reads the lines its byte scanner leaves to JSON.parse as it reads the ones it takes", () => {
    // an escape, a third key, a BOM opening the segment, a no-break space, CRLF, a key twice
    const lines = [
      `\ufeff${line(1)}`,
      '{"key":"k\\u0032","features":[2,2.5,-2]}',
      '{"key":"k3","features":[3,3.5,-3],"note":"x"}',
      `\u00a0${line(4)}\r`,
      '{"key":"k5","key":"k5","features":[5,5.5,-5]}',
      line(6),
    ];
    const parsed = parseRows(encoder.encode(lines.join("\n")), spec);
    expect(parsed.problem).toBeUndefined();
    expect(parsed.lines).toBe(6);
    expect(parsed.keys).toEqual(["k1", "k2", "k3", "k4", "k5", "k6"]);
    expect([...new Float32Array(Uint8Array.from(parsed.rows).buffer)]).toEqual(
      [1, 2, 3, 4, 5, 6].flatMap((k) => [k, k + 0.5, -k]),
    );
    // blank lines of every kind counted as the decoder's text counted them; a segment that is
    // only a byte order mark has no line (the decoder dropped it)
    const blanks = parseRows(encoder.encode(`\r\n \t\n\u000b\n\u00a0\n${line(1)}\r\n\r\n`), spec);
    expect(blanks).toMatchObject({ keys: ["k1"], lines: 6, items: 1 });
    expect(parseRows(encoder.encode("\ufeff"), spec)).toMatchObject({ keys: [], lines: 0 });
    // a datatype other than FP32 goes JSON.parse's way throughout
    const ints = parseRows(
      encoder.encode(`${line(7)}\n${JSON.stringify({ key: "i", features: [1, 2, 3] })}`),
      {
        width: 3,
        datatype: "INT32",
      },
    );
    expect(ints.problem).toMatchObject({ kind: "value", at: 1 });
    const whole = parseRows(encoder.encode(JSON.stringify({ key: "i", features: [1, 2, 3] })), {
      width: 3,
      datatype: "INT32",
    });
    expect([...new Int32Array(Uint8Array.from(whole.rows).buffer)]).toEqual([1, 2, 3]);
  });

  it("sizes its rows by what the bytes can hold: a MiB of blank lines for a wide input", () => {
    const image = { width: 224 * 224 * 3, datatype: "FP32" as const };
    const parsed = parseRows(new Uint8Array(1 << 20).fill(0x0a), image);
    expect(parsed).toMatchObject({ keys: [], items: 0, lines: 1 << 20 });
    expect(parsed.rows.buffer.byteLength).toBeLessThan(16 * 1024 * 1024);
  });

  it("stops at the first problem, keeping the rows before it, numbered within the segment", () => {
    const text = [line(1), "", "{not json", line(3)].join("\n");
    expect(parseRows(encoder.encode(text), spec)).toMatchObject({
      keys: ["k1"],
      problem: { kind: "json", at: 3 },
    });
    const items = [line(1), JSON.stringify({ key: "", features: [1, 2, 3] })].join("\n");
    expect(parseRows(encoder.encode(items), spec).problem).toEqual({
      kind: "item",
      at: 2,
      message: "needs a string key",
    });
    const wide = JSON.stringify({ key: "w", features: [1, 2] });
    expect(parseRows(encoder.encode(wide), spec).problem?.message).toBe("needs 3 finite features");
    const big = JSON.stringify({ key: "b", features: [1, 2, 1e300] });
    expect(parseRows(encoder.encode(big), spec).problem).toMatchObject({ kind: "value", at: 1 });
    expect(parseRows(encoder.encode("null"), spec).problem?.message).toBe("needs a string key");
    const long = JSON.stringify({ key: "k".repeat(100_000), features: [1, 2, 3] });
    expect(parseRows(encoder.encode(long), spec).problem?.message).toBe(
      "has a key of 100000 characters; at most 512",
    );
    const most = JSON.stringify({ key: "k".repeat(512), features: [1, 2, 3] });
    expect(parseRows(encoder.encode(most), spec).problem).toBeUndefined();
    // characters, as a custom_id's: 512 emoji (1,024 UTF-16 units) are 512
    const emoji = JSON.stringify({ key: "😀".repeat(512), features: [1, 2, 3] });
    expect(parseRows(encoder.encode(emoji), spec).problem).toBeUndefined();
    const more = JSON.stringify({ key: "😀".repeat(513), features: [1, 2, 3] });
    expect(parseRows(encoder.encode(more), spec).problem?.message).toBe(
      "has a key of 513 characters; at most 512",
    );
    // bytes that are not UTF-8 are that line's problem (read as U+FFFD, "k\xff" and "k\xfe"
    // had been one key), the rows before it kept
    const bad = (byte: number) =>
      Buffer.concat([
        encoder.encode(`${line(1)}\n{"key":"k`),
        Buffer.from([byte]),
        encoder.encode(`","features":[1,2,3]}\n${line(3)}`),
      ]);
    expect(parseRows(bad(0xff), spec)).toMatchObject({
      keys: ["k1"],
      lines: 2,
      problem: { kind: "json", at: 2, message: "is not UTF-8" },
    });
  });
});
