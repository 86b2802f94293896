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
