import { createHash } from "node:crypto";
import type { Context } from "hono";
import { describe, expect, it } from "vitest";
import { fingerprintOf } from "./idempotency.js";

/** A request as far as its fingerprint reads one. */
const request = (method: string, url: string) => ({ req: { method, url } }) as unknown as Context;

const sha = (text: string) => createHash("sha256").update(text).digest("base64url");

describe("fingerprintOf", () => {
  it("hashes the method, path, query and the body as JSON with every object's keys sorted", () => {
    // stored fingerprints are compared across replicas and upgrades: the text hashed is fixed
    const body = JSON.parse(
      '{"b":[1,2.5,{"d":1,"c":[3,"x",null,true]}],"a":{"z":[],"y":[[1],[{"k":"v"}]]},"e":"é"}',
    );
    expect(fingerprintOf(request("POST", "http://h/v1/jobs?x=1"), body)()).toBe(
      sha(
        'POST /v1/jobs?x=1\n{"a":{"y":[[1],[{"k":"v"}]],"z":[]},"b":[1,2.5,{"c":[3,"x",null,true],"d":1}],"e":"é"}',
      ),
    );
  });

  it("is the same for the same payload in any key order, and differs for another", () => {
    const at = request("POST", "http://h/v1/batches");
    const many = Array.from({ length: 200_000 }, (_, k) => k / 7);
    const one = fingerprintOf(at, { model: "m", items: [{ features: many, key: "a" }] })();
    expect(fingerprintOf(at, { items: [{ key: "a", features: [...many] }], model: "m" })()).toBe(
      one,
    );
    many[123_456] = 0;
    expect(fingerprintOf(at, { model: "m", items: [{ features: many, key: "a" }] })()).not.toBe(
      one,
    );
  });
});
