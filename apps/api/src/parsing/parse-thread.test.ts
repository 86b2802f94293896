import { readdirSync, readFileSync } from "node:fs";
import { encodeChunkOutput } from "@ferry/protocol";
import { afterAll, describe, expect, it } from "vitest";
import { parseRows } from "../batches/ndjson-rows.js";
import { renderRow } from "../batches/result-lines.js";
import { checkInputLines } from "../files/input-lines.js";
import { classify } from "../inference/classify.js";
import { ParseThread } from "./parse-thread.js";

const encoder = new TextEncoder();

const line = (k: number) => JSON.stringify({ key: `k${k}`, features: [k, k + 0.5, -k] });

describe("ParseThread", () => {
  const parser = new ParseThread();
  afterAll(() => parser.close());

  it("parses on its thread what parseRows parses here, in the order segments were sent", async () => {
    const spec = { width: 3, datatype: "FP32" as const };
    const texts = [0, 1, 2].map((s) =>
      Array.from({ length: 500 }, (_, k) => line(s * 500 + k)).join("\n"),
    );
    const parsed = await Promise.all(texts.map((t) => parser.rows(encoder.encode(t), spec)));
    for (const [s, p] of parsed.entries()) {
      const here = parseRows(encoder.encode(texts[s] ?? ""), spec);
      expect(p.keys).toEqual(here.keys);
      expect(Buffer.from(p.rows).equals(Buffer.from(here.rows))).toBe(true);
    }
  });

  it("checks a batch input file's lines as checkInputLines does here, numbered from the first", async () => {
    const input = (k: number) =>
      JSON.stringify({ custom_id: `c${k}`, method: "POST", url: "/v1/completions", body: {} });
    const text = `${input(1)}\n\n${input(2)}\n{"custom_id":"x","method":"GET"}\n${input(4)}\n`;
    const bytes = encoder.encode(text);
    const there = await parser.inputLines(bytes, 41);
    expect(there).toEqual(checkInputLines(bytes, 41));
    expect(there).toMatchObject({ customIds: ["c1", "c2"], numbers: [41, 43], seen: 4 });
    expect(there.problem).toMatch(/^line 44 needs method "POST"/);
    // the caller's bytes are copied, not moved: it stores them once they are checked
    expect(bytes.byteLength).toBe(text.length);
  });

  it("renders a stored chunk of answers as the result lines renderRow gives, its errors kept", async () => {
    const width = 4;
    const values = new Float32Array(3 * width);
    values.set([0.5, -1, 3.25, 2], 0);
    values.set([1e-7, 40, -40, 0], 2 * width);
    const stored = encodeChunkOutput({
      width,
      values,
      keys: ["a", 'b "quoted"', "c"],
      model_version: "7",
      batch: "b-1",
      errors: { 1: { code: "INVALID_INPUT", message: "bad row" } },
    });
    const text = new TextDecoder().decode(await parser.resultLines(stored));
    const row = (key: string, at: number) =>
      JSON.stringify(
        renderRow(
          {
            key,
            logits: Array.from(values.subarray(at * width, (at + 1) * width)),
            model_version: "7",
            batch: "b-1",
          },
          classify,
        ),
      );
    expect(text).toBe(
      `${row("a", 0)}\n${JSON.stringify({ key: 'b "quoted"', error: { code: "INVALID_INPUT", message: "bad row" } })}\n${row("c", 2)}\n`,
    );
    // the stored bytes were copied to move, not taken from the caller
    expect(stored.byteLength).toBeGreaterThan(0);
  });

  it("has room for the largest body it may be given: a 12 MB input file line of empty objects under a 16 MiB MAX_BODY_BYTES", async () => {
    // ~23 bytes of heap a byte of `{}` once parsed: 12 MB ran a 256 MB heap out, and every
    // piece waiting on the thread failed with it (an input file's line may be that long)
    const large = new ParseThread(16 * 2 ** 20);
    try {
      const body = `{"junk":[${"{},".repeat(4_000_000)}{}]}`;
      const line = `{"custom_id":"c","method":"POST","url":"/v1/completions","body":${body}}`;
      const checked = await large.inputLines(encoder.encode(line), 1);
      expect(checked.problem).toBeUndefined();
      expect(checked.customIds).toEqual(["c"]);
    } finally {
      await large.close();
    }
  }, 60_000);

  it.runIf(process.platform === "linux")(
    "runs at the nice value it is given, the API's loop at its own",
    async () => {
      const niceOf = (tid: string) => {
        const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
        return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);
      };
      const loop = niceOf(String(process.pid));
      const before = new Set(readdirSync("/proc/self/task"));
      const low = new ParseThread(8 * 2 ** 20, 12);
      try {
        // started on first use
        await low.rows(encoder.encode(line(1)), { width: 3, datatype: "FP32" });
        const started = readdirSync("/proc/self/task").filter((tid) => !before.has(tid));
        expect(started.map(niceOf)).toContain(Math.max(12, loop));
        expect(niceOf(String(process.pid))).toBe(loop);
      } finally {
        await low.close();
      }
    },
  );
});
