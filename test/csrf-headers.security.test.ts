import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempRepository } from "./helpers/model-repo.js";
import { Stack } from "./helpers/stack.js";

const repo = tempRepository({ digits: {} });
const stack = new Stack({
  env: { MODEL_REPOSITORY: repo, WORKER_MODELS: "digits" },
  apiEnv: { ADMIN_TOKEN: "csrf-admin" },
});
beforeAll(() => stack.start());
afterAll(() => stack.stop());

/** Signs in as the dashboard's form does; the session cookie it sets. */
async function signIn(): Promise<string> {
  const res = await fetch(stack.url("/dashboard/session"), {
    method: "POST",
    body: new URLSearchParams({ token: "csrf-admin" }),
    redirect: "manual",
  });
  expect(res.status).toBe(303);
  return (res.headers.get("set-cookie") ?? "").split(";")[0] ?? "";
}

const rollback = (headers: Record<string, string>) =>
  fetch(stack.url("/admin/models/digits/rollback"), { method: "POST", headers });

describe("cookie-authenticated admin changes check their origin", () => {
  it("a cross-site form post carrying only the cookie is refused; the dashboard's own is not", async () => {
    const cookie = await signIn();
    const self = new URL(stack.url("/")).host;
    // another site on the same host, another port (same-site: SameSite lets the cookie go)
    const cross = await rollback({
      Cookie: cookie,
      Origin: "http://127.0.0.1:8499",
      "Content-Type": "application/x-www-form-urlencoded",
    });
    expect(cross.status).toBe(403);
    expect(await cross.text()).toMatch(/Cross-site request refused/);
    expect((await rollback({ Cookie: cookie, "Sec-Fetch-Site": "same-site" })).status).toBe(403);
    // no Origin and no Sec-Fetch-Site: not a browser's own page either
    expect((await rollback({ Cookie: cookie })).status).toBe(403);
    expect((await rollback({ Cookie: cookie, Origin: `http://${self}` })).status).toBe(200);
    expect((await rollback({ Cookie: cookie, "Sec-Fetch-Site": "same-origin" })).status).toBe(200);
    // reading by cookie is not a change: allowed from the page
    const read = await fetch(stack.url("/admin/models"), { headers: { Cookie: cookie } });
    expect(read.status).toBe(200);
  });

  it("the sign-in form is a token: a body past 16 KiB is a 413 before any of it is parsed", async () => {
    // 8 MiB of form fields, open to anyone, had held the API's loop 3 s being parsed
    for (const chunked of [false, true]) {
      const form = "a=&".repeat(2_796_000);
      const body = chunked
        ? new ReadableStream({
            start(controller) {
              controller.enqueue(new TextEncoder().encode(form));
              controller.close();
            },
          })
        : form;
      const res = await fetch(stack.url("/dashboard/session"), {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded" },
        body,
        ...(chunked ? { duplex: "half" } : {}),
      } as RequestInit);
      expect(res.status).toBe(413);
      expect(await res.text()).toMatch(/exceeds 16384 bytes/);
    }
    // a token of any sensible length still signs in
    expect(await signIn()).toMatch(/=/);
  });

  it("API clients with the bearer token are unaffected", async () => {
    const res = await rollback({ Authorization: "Bearer csrf-admin" });
    expect(res.status).toBe(200);
  });
});

describe("security headers", () => {
  it("pages cannot be framed; bull-board gets a content policy; every answer is nosniff", async () => {
    for (const path of ["/", "/dashboard", "/docs"]) {
      const res = await fetch(stack.url(path));
      expect(res.headers.get("x-frame-options"), path).toBe("DENY");
      expect(res.headers.get("content-security-policy"), path).toMatch(/frame-ancestors 'none'/);
      expect(res.headers.get("x-content-type-options"), path).toBe("nosniff");
    }
    const board = await fetch(stack.url("/admin/queues"), {
      headers: { Authorization: "Bearer csrf-admin" },
    });
    expect(board.status).toBe(200);
    expect(board.headers.get("content-security-policy")).toMatch(
      /default-src 'self'.*frame-ancestors 'none'/,
    );
    expect(board.headers.get("x-frame-options")).toBe("DENY");
    const json = await fetch(stack.url("/v1/models"));
    expect(json.headers.get("x-content-type-options")).toBe("nosniff");
    // the predict fast path too
    const predict = await stack.post("/v1/models/digits/predict", {
      features: new Array(64).fill(0),
    });
    expect(predict.status).toBe(200);
    expect(predict.headers.get("x-content-type-options")).toBe("nosniff");
    // an event stream, whose head is written outside Hono's response (sse.ts)
    const job = await stack.post("/v1/jobs", {
      model: "digits",
      input: { features: new Array(64).fill(0) },
    });
    const { urls } = (await job.json()) as { urls: { events: string } };
    const events = await fetch(stack.url(urls.events));
    expect(events.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(events.headers.get("x-content-type-options")).toBe("nosniff");
    await events.text();
  });
});
