import { describe, expect, it } from "vitest";
import { RowBuffers } from "./row-buffers.js";

describe("RowBuffers", () => {
  it("gives a returned array to the next chunk that fits in it, the smallest that does", () => {
    const buffers = new RowBuffers(1 << 20);
    const large = buffers.take(1_000);
    const small = buffers.take(100);
    buffers.give(large);
    buffers.give(small);
    expect(buffers.take(50)).toBe(small);
    expect(buffers.take(500)).toBe(large);
    // none free now: a new one
    const fresh = buffers.take(50);
    expect(fresh).not.toBe(small);
    expect(fresh.length).toBe(50);
  });

  it("keeps no more than its bytes between chunks", () => {
    const buffers = new RowBuffers(4_000 * 4);
    const a = buffers.take(3_000);
    const b = buffers.take(3_000);
    buffers.give(a);
    buffers.give(b);
    expect(buffers.keptBytes).toBe(12_000);
    expect(buffers.take(3_000)).toBe(a);
    expect(buffers.take(3_000)).not.toBe(b);
  });
});
