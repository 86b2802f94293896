import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Stack } from "./helpers/stack.js";

// one key may send 1 MiB a second of large bodies, 2 MiB at once (twice MAX_BODY_BYTES)
const stack = new Stack({
  env: { WORKER_MODELS: "digits" },
  apiEnv: {
    API_KEYS: "k1,k2",
    ADMIN_TOKEN: "adm",
    MAX_BODY_BYTES: String(1024 * 1024),
    KEY_BODY_BYTES_PER_S: String(1024 * 1024),
  },
});
beforeAll(() => stack.start());
afterAll(() => stack.stop());

/** A legal batch of ~600 KB the API reads whole before it refuses it (no such model). */
const large = JSON.stringify({
  model: "no-such-model",
  items: Array.from({ length: 17_000 }, (_, k) => ({ key: `k${k}`, features: [0, 0, 0, 0] })),
});
const send = (key: string, body = large) =>
  fetch(stack.url("/v1/batches"), {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
    body,
  });

describe("large request bodies are held to a rate per key", () => {
  it("one key's back-to-back large bodies are refused past its rate, before they are parsed; another key's, its small ones and the admin's are not", async () => {
    // each was parsed whole on the API's loop (8 MB: ~150 ms), and one key sending them back
    // to back held every other key's requests behind them
    const statuses: number[] = [];
    for (let k = 0; k < 6; k++) statuses.push((await send("k1")).status);
    // 2 MiB at once: four of ~600 KB (the fourth taken with the bucket not yet in debt)
    expect(statuses.slice(0, 4)).toEqual([404, 404, 404, 404]);
    const refused = await send("k1");
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await refused.text()).toMatch(/KEY_BODY_BYTES_PER_S/);
    // another key, the same key's small bodies, the admin: untouched
    expect((await send("k2")).status).toBe(404);
    const small = JSON.stringify({
      input_file_id: "file-none",
      endpoint: "/v1/completions",
      completion_window: "24h",
    });
    expect((await send("k1", small)).status).toBe(404);
    expect((await send("adm")).status).toBe(404);
    // a chunked body of a key in debt too (refused before it is read)
    const chunked = await fetch(stack.url("/v1/batches"), {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: "Bearer k1" },
      body: new ReadableStream({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(large));
          controller.close();
        },
      }),
      duplex: "half",
    } as RequestInit);
    expect(chunked.status).toBe(429);
    // paid back at its rate: its debt, a few hundred KB, is paid within the wait
    await new Promise((r) => setTimeout(r, 2_500));
    expect((await send("k1")).status).toBe(404);
  });
});
