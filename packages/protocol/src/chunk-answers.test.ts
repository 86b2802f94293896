import { describe, expect, it } from "vitest";
import { ChunkAnswers, decodeChunkAnswers, encodeChunkAnswers } from "./chunk-answers.js";

const text = (block: { bytes: Buffer; lines: number }) => ({
  text: block.bytes.toString("utf8"),
  lines: block.lines,
});

describe("a chunk's answers kept whole", () => {
  it("gives back each file's block as it went in, lines with any characters", () => {
    const ok = ['{"custom_id":"é😀\\n"}', '{"custom_id":"b"}'];
    const failed = ['{"custom_id":"c","response":{"status_code":400}}'];
    const back = decodeChunkAnswers(encodeChunkAnswers(ok, failed));
    expect(text(back.ok)).toEqual({ text: ok.join("\n"), lines: 2 });
    expect(text(back.failed)).toEqual({ text: failed[0], lines: 1 });
  });

  it("an empty block is empty, on either side", () => {
    const onlyFailed = decodeChunkAnswers(encodeChunkAnswers([], ["x"]));
    expect([text(onlyFailed.ok), text(onlyFailed.failed)]).toEqual([
      { text: "", lines: 0 },
      { text: "x", lines: 1 },
    ]);
    const onlyOk = decodeChunkAnswers(encodeChunkAnswers(["y"], []));
    expect([text(onlyOk.ok), text(onlyOk.failed)]).toEqual([
      { text: "y", lines: 1 },
      { text: "", lines: 0 },
    ]);
  });

  it("keeps lines of any length in order as the buffer grows past its first size", () => {
    const answers = new ChunkAnswers();
    const lines = Array.from({ length: 300 }, (_, k) => `${k}:${"é".repeat(k * 7)}`);
    for (const [k, line] of lines.entries()) answers.add(k % 3 !== 0, line);
    const back = decodeChunkAnswers(answers.encode());
    expect(text(back.ok)).toEqual({
      text: lines.filter((_, k) => k % 3 !== 0).join("\n"),
      lines: 200,
    });
    expect(text(back.failed)).toEqual({
      text: lines.filter((_, k) => k % 3 === 0).join("\n"),
      lines: 100,
    });
  });

  it("writes a header the version before reads: its first three fields, the ok block in UTF-16 units", () => {
    const ok = ['{"custom_id":"é😀"}', '{"custom_id":"b"}'];
    const failed = ['{"custom_id":"ç"}'];
    const value = encodeChunkAnswers(ok, failed).toString("utf8");
    // the version before's decoder, as it was
    const end = value.indexOf("\n");
    const [okLines, failedLines, okChars] = value.slice(0, end).split(" ").map(Number);
    const body = end + 1;
    expect([okLines, failedLines]).toEqual([2, 1]);
    expect(value.slice(body, body + (okChars ?? 0))).toBe(ok.join("\n"));
    expect(value.slice(body + (okChars ?? 0))).toBe(failed[0]);
  });

  it("reads a value kept before answers were bytes (its ok block sized in UTF-16 units)", () => {
    const ok = ['{"custom_id":"é😀"}', '{"custom_id":"b"}'];
    const failed = ['{"custom_id":"ç"}'];
    const okText = ok.join("\n");
    const legacy = Buffer.from(`2 1 ${okText.length}\n${okText}${failed.join("\n")}`);
    const back = decodeChunkAnswers(legacy);
    expect(text(back.ok)).toEqual({ text: okText, lines: 2 });
    expect(text(back.failed)).toEqual({ text: failed[0], lines: 1 });
  });

  it("refuses a value with no header", () => {
    expect(() => decodeChunkAnswers(Buffer.from("no header"))).toThrow(/no header/);
  });
});
