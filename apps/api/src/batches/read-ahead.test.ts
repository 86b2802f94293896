import { describe, expect, it } from "vitest";
import { ReadAhead } from "./read-ahead.js";

describe("ReadAhead", () => {
  it("keeps the next reads in flight while the first is awaited, each index read once", async () => {
    const asked: number[] = [];
    const pending = new Map<number, (v: string) => void>();
    const reads = new ReadAhead(3, (at) => {
      asked.push(at);
      return new Promise<string>((resolve) => pending.set(at, resolve));
    });
    const first = reads.read(0);
    expect(asked).toEqual([0, 1, 2]);
    for (const [at, resolve] of pending) resolve(`chunk ${at}`);
    expect(await first).toBe("chunk 0");
    const second = reads.read(1);
    expect(asked).toEqual([0, 1, 2, 3]);
    expect(await second).toBe("chunk 1");
    pending.get(3)?.("chunk 3");
    expect(await reads.read(2)).toBe("chunk 2");
    expect(await reads.read(3)).toBe("chunk 3");
    expect(asked).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it("hands a read's failure to whoever asks for it, and none to anyone before", async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      const reads = new ReadAhead(4, async (at) => {
        if (at >= 1) throw new Error(`read ${at} failed`);
        return at;
      });
      expect(await reads.read(0)).toBe(0);
      // reads 1-3 failed, unasked: the walk stops here, as a cancelled run's does
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(unhandled).toEqual([]);
      await expect(reads.read(1)).rejects.toThrow("read 1 failed");
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });
});
