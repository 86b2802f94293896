import { describe, expect, it } from "vitest";
import { BodyRateLimiter, LARGE_BODY_BYTES } from "./key-body-rate.js";

const MB = 1024 * 1024;

describe("BodyRateLimiter", () => {
  it("holds each sender to its rate: a key, or with no keys (one open tenant) a client address; never the admin", () => {
    const limit = new BodyRateLimiter({ bytesPerS: MB, burst: 2 * MB });
    const open = { id: "", admin: false };
    const a = BodyRateLimiter.sender(open, "10.0.0.1");
    const b = BodyRateLimiter.sender(open, "10.0.0.2");
    // with no keys every caller had been one sender: one flooding client refused all others
    expect(a).not.toBe(b);
    limit.take(a, 2 * MB);
    limit.take(a, MB); // its bucket was not in debt yet: let in, and now in debt
    expect(() => limit.take(a, MB)).toThrow(/KEY_BODY_BYTES_PER_S/);
    expect(() => limit.assertNotInDebt(a)).toThrow(/KEY_BODY_BYTES_PER_S/);
    // another address, small bodies, the admin: not held
    limit.take(b, MB);
    limit.take(a, LARGE_BODY_BYTES - 1);
    expect(BodyRateLimiter.sender({ id: "admin", admin: true }, "10.0.0.1")).toBeUndefined();
    expect(BodyRateLimiter.sender({ id: "k1", admin: false }, "10.0.0.1")).toBe("k1");
  });
});

describe("BodyRateLimiter.takeWeight", () => {
  it("counts a body at its weight once read: the rest over what its length counted, or all of it for a small body", () => {
    const limit = new BodyRateLimiter({ bytesPerS: 1, burst: 2 * MB });
    // a 40 KB body (never counted by its length) that parses as 700 KB
    limit.take("a", 40_000);
    limit.takeWeight("a", 40_000, 700_000);
    limit.takeWeight("a", 40_000, 700_000);
    limit.takeWeight("a", 40_000, 700_000); // not in debt before it: let in
    expect(() => limit.takeWeight("a", 40_000, 700_000)).toThrow(/KEY_BODY_BYTES_PER_S/);
    // a large body is counted by its length first, then by the rest of its weight
    limit.take("b", MB);
    limit.takeWeight("b", MB, MB + 100);
    expect(() => limit.take("b", MB)).not.toThrow();
    expect(() => limit.take("b", MB)).toThrow(/KEY_BODY_BYTES_PER_S/);
    // a weight under the bytes counted (a text of characters past ASCII) gives none back
    limit.take("d", 2 * MB + 1_000);
    limit.takeWeight("d", 2 * MB + 1_000, MB);
    expect(() => limit.take("d", MB)).toThrow(/KEY_BODY_BYTES_PER_S/);
    // light bodies and the admin are not counted
    for (let k = 0; k < 100; k++) limit.takeWeight("c", 1_000, LARGE_BODY_BYTES - 1);
    limit.takeWeight(undefined, MB, 100 * MB);
  });
});
