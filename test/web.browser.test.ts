import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { scrapeMetric } from "./helpers/metrics.js";
import { Stack } from "./helpers/stack.js";

// The pages in Debian's chromium, headless, driven by playwright-core; every request a page
// makes must go to the API itself (no CDN: they work offline).
const stack = new Stack({
  env: { WORKER_MODELS: "digits,tiny-lm" },
  apiEnv: { ADMIN_TOKEN: "browser-admin" },
});
let browser: Browser;
let page: Page;
const foreign: string[] = [];
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
  page = await browser.newPage();
  page.on("request", (r) => {
    if (!r.url().startsWith(stack.baseUrl)) foreign.push(r.url());
  });
});
afterAll(async () => {
  await browser?.close();
  await stack.stop();
});

describe("playground at /", () => {
  it("a digit drawn on the pad is classified as you draw, with a bar per class", async () => {
    await page.goto(stack.url("/"));
    const box = await page.getByTestId("digit-canvas").boundingBox();
    if (!box) throw new Error("no canvas");
    // a vertical stroke down the middle: a one
    await page.mouse.move(box.x + box.width * 0.5, box.y + box.height * 0.15);
    await page.mouse.down();
    for (let k = 1; k <= 20; k++)
      await page.mouse.move(box.x + box.width * 0.5, box.y + box.height * (0.15 + k * 0.035));
    await page.mouse.up();
    await expect
      .poll(async () => page.getByTestId("digit-prediction").textContent(), { timeout: 10_000 })
      .toMatch(/^1 \(\d+\.\d%\)$/);
    expect(await page.locator("#digit-bars li").count()).toBe(10);
    expect(await page.locator("#digit-meta").textContent()).toMatch(
      /model version \d · source model/,
    );
    await page.getByTestId("digit-clear").click();
    expect(await page.getByTestId("digit-prediction").textContent()).toBe("Draw a digit");
  });

  it("text streams in token by token with its time to first token; Stop frees the seat", async () => {
    await page.getByTestId("prompt").fill("Q: Why is the sky blue?\nA:");
    await page.locator("#max-tokens").fill("30");
    await page.getByTestId("generate").click();
    await expect
      .poll(async () => page.getByTestId("ttft").textContent(), { timeout: 10_000 })
      .toMatch(/^time to first token \d+ ms$/);
    await expect.poll(async () => page.getByTestId("generate").isEnabled()).toBe(true);
    expect((await page.getByTestId("completion").textContent())?.length).toBeGreaterThan(0);

    const metrics = stack.workers[0]?.metricsUrl ?? "";
    const cancelled = await scrapeMetric(metrics, "ferry_worker_cancelled_sequences_total");
    await page.locator("#max-tokens").fill("200");
    await page.getByTestId("prompt").fill("It");
    await page.getByTestId("generate").click();
    await expect
      .poll(async () => (await page.getByTestId("completion").textContent())?.length ?? 0)
      .toBeGreaterThan(0);
    await page.getByTestId("stop").click();
    await expect
      .poll(() => scrapeMetric(metrics, "ferry_worker_cancelled_sequences_total"), {
        timeout: 5_000,
      })
      .toBe(cancelled + 1);
  });

  it("an async job is submitted and followed to its end", async () => {
    await page.getByTestId("job-submit").click();
    await expect
      .poll(async () => page.getByTestId("job-status").textContent(), { timeout: 10_000 })
      .toBe("succeeded");
    expect(await page.locator("#job-events li").count()).toBeGreaterThanOrEqual(3);
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
    expect(await page.locator(".opblock").count()).toBeGreaterThan(10);
  });
});

describe("dashboard at /dashboard", () => {
  it("asks for the admin token, signs in with an HttpOnly SameSite=Strict cookie, and shows live queues", async () => {
    await page.goto(stack.url("/dashboard"));
    await expect.poll(async () => page.getByTestId("admin-token").isVisible()).toBe(true);
    await page.getByTestId("admin-token").fill("browser-admin");
    await page.getByTestId("admin-login").click();
    await expect
      .poll(async () => page.getByTestId("dashboard-rows").textContent(), { timeout: 10_000 })
      .toMatch(/digits/);
    const cookie = (await page.context().cookies()).find((c) => c.name === "ferry_admin");
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Strict" });
    // the Bearer check for API clients is unchanged: no token, no admin
    expect((await fetch(stack.url("/admin/dashboard"))).status).toBe(401);
  });

  it("no page asked anything of another host", () => {
    expect(foreign).toEqual([]);
  });
});
