import { mkdirSync } from "node:fs";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DIGITS, PLACES, placed } from "./helpers/handwriting.js";
import { scrapeMetric } from "./helpers/metrics.js";
import { busyNeighbours } from "./helpers/neighbours.js";
import { Stack } from "./helpers/stack.js";

// The pages in Debian's chromium, headless, driven by playwright-core; every request a page
// makes must go to the API itself (no CDN: they work offline).
const stack = new Stack({
  env: { WORKER_MODELS: "digits-cnn,tiny-lm" },
  apiEnv: { ADMIN_TOKEN: "browser-admin" },
});
let browser: Browser;
let page: Page;
const foreign: string[] = [];
const consoleErrors: string[] = [];
/** Screenshots of each page, for a person to look at (test artifacts, not committed). */
const SHOTS = "test-results/pages";
beforeAll(async () => {
  await stack.start();
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
  page = await browser.newPage({ viewport: { width: 1100, height: 1200 } });
  page.on("request", (r) => {
    if (!r.url().startsWith(stack.baseUrl)) foreign.push(r.url());
  });
  page.on("console", (m) => {
    if (m.type() === "error") consoleErrors.push(`${page.url()}: ${m.text()}`);
  });
  page.on("pageerror", (err) => consoleErrors.push(`${page.url()}: ${err.message}`));
  mkdirSync(SHOTS, { recursive: true });
});
afterAll(async () => {
  await browser?.close();
  await stack.stop();
});

/** Draws through `points` (fractions of the pad's width and height) in one stroke. */
async function stroke(points: Array<[number, number]>, steps = 4): Promise<void> {
  const box = await page.getByTestId("digit-canvas").boundingBox();
  if (!box) throw new Error("no canvas");
  const [first, ...rest] = points;
  await page.mouse.move(
    box.x + (first?.[0] ?? 0) * box.width,
    box.y + (first?.[1] ?? 0) * box.height,
  );
  await page.mouse.down();
  for (const [x, y] of rest)
    await page.mouse.move(box.x + x * box.width, box.y + y * box.height, { steps });
  await page.mouse.up();
}

const prediction = () => page.getByTestId("digit-prediction").textContent();
/** The pad's answer to the drawing as it is now: once no newer prediction is on its way. */
async function settledPrediction(): Promise<string | null> {
  await expect
    .poll(() => page.getByTestId("digit-prediction").getAttribute("data-pending"), {
      timeout: 10_000,
    })
    .toBe("false");
  return prediction();
}

describe("playground at /", () => {
  it("a digit drawn on the pad is classified as you draw, with a bar per class", async () => {
    await page.goto(stack.url("/"));
    // a vertical stroke down the middle: a one
    await stroke(Array.from({ length: 21 }, (_, k) => [0.5, 0.15 + k * 0.035] as [number, number]));
    expect(await settledPrediction()).toMatch(/^1 \(\d+\.\d%\)$/);
    expect(await page.locator("#digit-bars li").count()).toBe(10);
    expect(await page.locator("#digit-meta").textContent()).toMatch(
      // the pad asks again as the stroke ends: the same drawing may be the cache's answer
      /model version \d · source (model|cache)/,
    );
    await page.screenshot({ path: `${SHOTS}/playground-one.png` });
    await page.getByTestId("digit-clear").click();
    expect(await prediction()).toBe("Draw a digit");
    // a ring: a zero
    await stroke(
      Array.from({ length: 33 }, (_, k) => {
        const a = (k / 32) * 2 * Math.PI;
        return [0.5 + 0.25 * Math.sin(a), 0.5 - 0.35 * Math.cos(a)] as [number, number];
      }),
    );
    expect(await settledPrediction()).toMatch(/^0 \(/);
    await page.screenshot({ path: `${SHOTS}/playground-zero.png` });
  });

  it("handwritten digits 0-9 read as themselves wherever on the pad they are drawn", async () => {
    // each digit small at the top left, large about the centre and smaller at the bottom right
    const misread: string[] = [];
    for (const [p, place] of PLACES.entries())
      for (const [digit, strokes] of DIGITS.entries()) {
        await page.getByTestId("digit-clear").click();
        for (const points of placed(strokes, place)) await stroke(points, 1);
        const read = (await settledPrediction())?.split(" ")[0];
        if (read !== String(digit)) misread.push(`${digit} at place ${p} read ${read}`);
        if (digit === 7) await page.screenshot({ path: `${SHOTS}/playground-seven-${p}.png` });
      }
    // the pad's drawing is not MNIST's handwriting: a few may be misread, not more
    expect(misread.length, misread.join("; ")).toBeLessThanOrEqual(3);
    await page.getByTestId("digit-clear").click();
  }, 180_000);

  it("seeded text streams in exactly as the same request over the API answers it", async () => {
    const prompt = "Q: Why is the sky blue?\nA:";
    await page.getByTestId("prompt").fill(prompt);
    await page.locator("#max-tokens").fill("40");
    await page.locator("#temperature").fill("0.8");
    await page.locator("#seed").fill("7");
    await page.getByTestId("generate").click();
    // the stream's end, however slow a loaded machine makes its 40 tokens (the poll's 1 s
    // default had timed a CI run's stream out)
    await expect
      .poll(async () => page.getByTestId("generate").isEnabled(), { timeout: 15_000 })
      .toBe(true);
    const shown = await page.getByTestId("completion").textContent();
    const api = (await (
      await stack.post("/v1/completions", {
        model: "tiny-lm",
        prompt,
        max_tokens: 40,
        temperature: 0.8,
        seed: 7,
      })
    ).json()) as { choices: Array<{ text: string }> };
    expect(shown).toBe(api.choices[0]?.text);
    await page.locator("#seed").fill("");
  });

  it("text streams in token by token with its time to first token; Stop frees the seat", async () => {
    await page.getByTestId("prompt").fill("Q: Why is the sky blue?\nA:");
    await page.locator("#max-tokens").fill("30");
    await page.getByTestId("generate").click();
    await expect
      .poll(async () => page.getByTestId("ttft").textContent(), { timeout: 10_000 })
      .toMatch(/^time to first token \d+ ms$/);
    // the stream's end, however slow a loaded machine makes its 40 tokens (the poll's 1 s
    // default had timed a CI run's stream out)
    await expect
      .poll(async () => page.getByTestId("generate").isEnabled(), { timeout: 15_000 })
      .toBe(true);
    expect((await page.getByTestId("completion").textContent())?.length).toBeGreaterThan(0);

    const metrics = stack.workers[0]?.metricsUrl ?? "";
    const cancelled = await scrapeMetric(metrics, "ferry_worker_cancelled_sequences_total");
    // other streams share the batch, so that the page's generation is still running at Stop
    const neighbours = busyNeighbours(stack, 12);
    await page.locator("#max-tokens").fill("240");
    await page.locator("#ignore-eos").check();
    await page.getByTestId("prompt").fill("It");
    await page.getByTestId("generate").click();
    await expect
      .poll(async () => (await page.getByTestId("completion").textContent())?.length ?? 0, {
        interval: 10,
      })
      .toBeGreaterThan(0);
    await page.getByTestId("stop").click();
    const shown = (await page.getByTestId("completion").textContent()) ?? "";
    await expect
      .poll(() => scrapeMetric(metrics, "ferry_worker_cancelled_sequences_total"), {
        timeout: 5_000,
      })
      .toBe(cancelled + 1);
    await neighbours.stop();
    expect(Buffer.byteLength(shown)).toBeLessThan(240);
    await page.locator("#ignore-eos").uncheck();
  });

  it("an async job is submitted and followed to its end", async () => {
    await page.getByTestId("job-submit").click();
    await expect
      .poll(async () => page.getByTestId("job-status").textContent(), { timeout: 10_000 })
      .toBe("succeeded");
    expect(await page.locator("#job-events li").count()).toBeGreaterThanOrEqual(3);
    await page.screenshot({ path: `${SHOTS}/playground.png`, fullPage: true });
  });
});

describe("API docs at /docs", () => {
  it("Swagger UI renders this server's /openapi.json", async () => {
    await page.goto(stack.url("/docs"));
    await expect
      .poll(async () => page.locator(".swagger-ui .title").first().textContent(), {
        timeout: 15_000,
      })
      .toMatch(/Ferry/);
    const routes = await page.locator(".opblock-summary-path").allTextContents();
    for (const path of [
      "/v1/chat/completions",
      "/v1/completions",
      "/v1/jobs",
      "/v2/models/{name}/infer",
    ])
      expect(routes.map((r) => r.replace(/\u200b/g, ""))).toContain(path);
    await page.screenshot({ path: `${SHOTS}/docs.png` });
  });
});

describe("dashboard at /dashboard", () => {
  it("asks for the admin token, signs in with an HttpOnly SameSite=Strict cookie, and shows live queues", async () => {
    await page.goto(stack.url("/dashboard"));
    await expect
      .poll(async () => page.getByTestId("admin-token").isVisible(), { timeout: 10_000 })
      .toBe(true);
    // a wrong token stays on the page, which says so (it showed the API's raw JSON)
    await page.getByTestId("admin-token").fill("not-the-token");
    await page.getByTestId("admin-login").click();
    await expect
      .poll(async () => page.locator("#login-error").textContent(), { timeout: 10_000 })
      .toMatch(/not this server's ADMIN_TOKEN/);
    expect(new URL(page.url()).pathname).toBe("/dashboard");
    await page.getByTestId("admin-token").fill("browser-admin");
    await page.getByTestId("admin-login").click();
    await expect
      .poll(async () => page.getByTestId("dashboard-rows").textContent(), { timeout: 10_000 })
      .toMatch(/digits/);
    const cookie = (await page.context().cookies()).find((c) => c.name === "ferry_admin");
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Strict" });
    // the Bearer check for API clients is unchanged: no token, no admin
    expect((await fetch(stack.url("/admin/dashboard"))).status).toBe(401);
    await page.screenshot({ path: `${SHOTS}/dashboard.png` });
  });

  it("bull-board at /admin/queues shows every model version's queue to the signed-in browser", async () => {
    await page.goto(stack.url("/admin/queues"));
    await expect
      .poll(async () => page.locator("body").textContent(), { timeout: 15_000 })
      .toMatch(/digits\.v2/);
    expect(await page.locator("body").textContent()).toMatch(/tiny-lm\.v1/);
    await page.screenshot({ path: `${SHOTS}/queues.png` });
    expect((await fetch(stack.url("/admin/queues"))).status).toBe(401);
  });

  it("a queued job is cancelled from the playground and never runs", async () => {
    // with its worker gone the job waits in the queue, where a cancel is certain to find it
    for (const w of stack.workers) w.child.kill("SIGTERM");
    await Promise.all(stack.workers.map((w) => w.exited));
    await page.goto(stack.url("/"));
    await page.getByTestId("job-kind").selectOption("tiny-lm");
    await page.getByTestId("job-submit").click();
    await expect
      .poll(async () => page.getByTestId("job-status").textContent(), { timeout: 10_000 })
      .toBe("queued");
    await page.getByTestId("job-cancel").click();
    await expect
      .poll(async () => page.getByTestId("job-status").textContent(), { timeout: 10_000 })
      .toBe("cancelled");
  });

  it("no page asked anything of another host, and none logged an error", () => {
    expect(foreign).toEqual([]);
    expect(consoleErrors).toEqual([]);
  });
});
