import { describe, expect, it } from "vitest";
import { HitRate } from "./hit-rate.js";

describe("HitRate", () => {
  it("says nothing of a cache it has seen few lookups of", () => {
    const rate = new HitRate();
    for (let i = 0; i < 20; i++) rate.record(false);
    expect(rate.rarelyHits()).toBe(false);
  });

  it("a cache that keeps missing rarely hits; one that answers one lookup in five does not", () => {
    const missing = new HitRate();
    const answering = new HitRate();
    for (let i = 0; i < 500; i++) {
      missing.record(i % 100 === 0);
      answering.record(i % 5 === 0);
    }
    expect(missing.rarelyHits()).toBe(true);
    expect(answering.rarelyHits()).toBe(false);
  });

  it("recovers once the cache hits again", () => {
    const rate = new HitRate();
    for (let i = 0; i < 500; i++) rate.record(false);
    expect(rate.rarelyHits()).toBe(true);
    for (let i = 0; i < 100; i++) rate.record(true);
    expect(rate.rarelyHits()).toBe(false);
  });
});
