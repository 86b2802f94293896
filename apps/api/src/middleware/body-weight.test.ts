import { FerryError } from "@ferry/protocol";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import type { HonoEnv, Services } from "../services.js";
import { bodyWeight } from "./body-weight.js";
import { BodyRateLimiter } from "./key-body-rate.js";

const LIMIT = 1_000_000;

/** A Hono app with only the weighing before two routes that read their body as JSON twice. */
function app(rate: BodyRateLimiter) {
  // what `bodyLimitOf` reads: no model route's budget here, MAX_BODY_BYTES of 1 MB
  const services = {
    env: { MAX_BODY_BYTES: LIMIT },
    inference: { maxBodyBytes: () => undefined },
  } as unknown as Services;
  const hono = new Hono<HonoEnv>();
  hono.onError((err, c) =>
    c.json(
      { error: err.message },
      err instanceof FerryError && err.code === "QUEUE_FULL" ? 429 : 413,
    ),
  );
  hono.use(async (c, next) => {
    c.set("tenant", { id: "k1", admin: false });
    await next();
  });
  hono.use(bodyWeight(services, rate, () => false));
  const twice = async (c: { req: { json: () => Promise<unknown> } }) => {
    const first = await c.req.json();
    return { same: first === (await c.req.json()) };
  };
  hono.post("/v1/jobs", async (c) => c.json(await twice(c)));
  hono.post("/v1/batches", async (c) =>
    c.json({ bytes: [...new Uint8Array(await c.req.arrayBuffer())] }),
  );
  hono.post("/v2/models/m/infer", async (c) =>
    c.json({ bytes: (await c.req.arrayBuffer()).byteLength }),
  );
  return hono;
}

const post = (hono: Hono<HonoEnv>, path: string, body: string | Uint8Array, headers = {}) =>
  hono.request(path, {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      "Content-Length": String(body.length),
      ...headers,
    },
    body,
  });

/** `count` empty objects: ~46 weighed bytes each in 3 bytes. */
const objects = (count: number) => `{"junk":[${"{},".repeat(count - 1)}{}]}`;

describe("bodyWeight", () => {
  it("refuses a body past its route's limit in weight and parses the rest once", async () => {
    const hono = app(new BodyRateLimiter({ bytesPerS: 1, burst: 10 * LIMIT }));
    const refused = await post(hono, "/v1/jobs", objects(30_000));
    expect(refused.status).toBe(413);
    expect(await refused.text()).toMatch(/costs more to read than its route's largest body/);
    // the schema's read and a fingerprint's are one parse
    const served = await post(hono, "/v1/jobs", objects(100));
    expect(await served.json()).toEqual({ same: true });
  });

  it("weighs a JSON body sent with Triton's binary header anywhere but the v2 infer routes", async () => {
    const hono = app(new BodyRateLimiter({ bytesPerS: 1, burst: 10 * LIMIT }));
    // the header had skipped the weighing on every route (attack: 8 MB of `{}` on /v1/jobs
    // with `Inference-Header-Content-Length: 0`, 2 s of the loop each)
    for (const length of ["0", "nope", ""])
      expect(
        (
          await post(hono, "/v1/jobs", objects(30_000), {
            "Inference-Header-Content-Length": length,
          })
        ).status,
      ).toBe(413);
    // on v2 infer, its JSON head is weighed and its tensors are bytes
    const head = objects(30_000);
    const binary = new Uint8Array([...new TextEncoder().encode(head), ...new Uint8Array(64)]);
    const v2 = (length: number) =>
      post(hono, "/v2/models/m/infer", binary, {
        "Content-Type": "application/octet-stream",
        "Inference-Header-Content-Length": String(length),
      });
    expect((await v2(head.length)).status).toBe(413);
    expect((await v2(2)).status).toBe(200);
  });

  it("counts a body at its weight, twice with an Idempotency-Key (its fingerprint walks it again)", async () => {
    // ~400 KB of weight in 27 KB: never counted by its length (under 64 KiB)
    const body = objects(9_000);
    const untilRefused = async (headers: Record<string, string>) => {
      const hono = app(new BodyRateLimiter({ bytesPerS: 1, burst: LIMIT }));
      for (let k = 1; k <= 10; k++)
        if ((await post(hono, "/v1/jobs", body, headers)).status === 429) return k;
      return undefined;
    };
    expect(await untilRefused({})).toBe(4);
    expect(await untilRefused({ "Idempotency-Key": "a" })).toBe(3);
  });

  it("hands a batch route the bytes sent: a key's bad UTF-8 is the route's to refuse", async () => {
    // read as text first, they had been its re-encoding, 0xFF a U+FFFD (review)
    const hono = app(new BodyRateLimiter({ bytesPerS: 1, burst: 10 * LIMIT }));
    const sent = new Uint8Array([
      ...new TextEncoder().encode('{"k":"a'),
      0xff,
      ...new TextEncoder().encode('b"}'),
    ]);
    const res = await post(hono, "/v1/batches", sent);
    expect(((await res.json()) as { bytes: number[] }).bytes).toEqual([...sent]);
  });
});
