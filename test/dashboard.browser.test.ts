import { mkdirSync } from "node:fs";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { samples } from "./helpers/samples.js";
import { Stack, waitFor } from "./helpers/stack.js";

// The dashboard in Debian's chromium after some traffic: where each version's time goes
// (charts of its last minutes, its slowest requests), on a laptop and on a phone.
const ADMIN = "dashboard-admin";
const stack = new Stack({
  env: { WORKER_MODELS: "digits,tiny-lm" },
  apiEnv: { ADMIN_TOKEN: ADMIN },
});
let browser: Browser;
let page: Page;
const consoleErrors: string[] = [];
const SHOTS = "test-results/pages";

interface SlowRequest {
  id: string;
  total_ms: number;
  queue_ms?: number;
  batch_ms?: number;
  compute_ms?: number;
  ttft_ms?: number;
  tokens?: number;
}
interface Dashboard {
  models: Array<{
    name: string;
    versions: Array<{
      version: string;
      recent: {
        requests: number;
        p50_ms: number | null;
        p99_ms: number | null;
        points: Array<{ requests_per_s: number; tokens_per_s: number; depth: number | null }>;
        slowest: SlowRequest[];
      };
    }>;
  }>;
}

async function dashboard(): Promise<Dashboard> {
  const res = await fetch(stack.url("/admin/dashboard"), {
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  return (await res.json()) as Dashboard;
}

const versionsOf = (d: Dashboard, model: string) =>
  d.models.find((m) => m.name === model)?.versions ?? [];

beforeAll(async () => {
  await stack.start();
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"],
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on("console", (m) => {
    if (m.type() === "error") consoleErrors.push(m.text());
  });
  page.on("pageerror", (err) => consoleErrors.push(err.message));
  mkdirSync(SHOTS, { recursive: true });
});
afterAll(async () => {
  await browser?.close();
  await stack.stop();
});

/**
 * Cards (sections) with anything reaching past their edges, and whether the page scrolls
 * sideways. By each element's box: a card's scrollWidth does not grow with content that
 * overflows it visibly. Run in the page, as text (this project's types have no DOM).
 */
async function overflow(): Promise<{ cards: string[]; page: boolean }> {
  return page.evaluate(`(() => ({
    cards: [...document.querySelectorAll("section")]
      .filter((s) => !s.hidden)
      .flatMap((s) => {
        const card = s.getBoundingClientRect();
        const out = [...s.querySelectorAll("*")].filter((e) => {
          const r = e.getBoundingClientRect();
          return r.width > 0 && (r.right > card.right + 1 || r.left < card.left - 1);
        });
        return out.length ? [(s.getAttribute("aria-label") ?? s.id) + ": " + out[0].tagName] : [];
      }),
    page: document.documentElement.scrollWidth > window.innerWidth,
  }))()`);
}

describe("the dashboard shows where time goes", () => {
  it("keeps each version's recent activity across processes: true quantiles, tokens, the slowest requests and their parts", async () => {
    const features = samples.digits.inputs[0] ?? [];
    const sent = new Set<string>();
    for (let k = 0; k < 60; k++) {
      const id = `dash-${k}`;
      sent.add(id);
      // past the cache (digits keeps answers): a hit is counted apart, not as the model's
      const res = await stack.post(
        "/v1/models/digits/predict",
        { features },
        { "x-request-id": id, "cache-control": "no-cache" },
      );
      expect(res.status).toBe(200);
    }
    let tokens = 0;
    for (let k = 0; k < 3; k++) {
      const res = await stack.post("/v1/completions", {
        model: "tiny-lm",
        prompt: "Once upon a time",
        max_tokens: 8,
      });
      expect(res.status).toBe(200);
      tokens += ((await res.json()) as { usage: { completion_tokens: number } }).usage
        .completion_tokens;
    }
    // the processes flush each second; a step is shown once it is over
    let d = await dashboard();
    await waitFor(async () => {
      d = await dashboard();
      const digits = versionsOf(d, "digits").reduce((n, v) => n + v.recent.requests, 0);
      const lm = versionsOf(d, "tiny-lm").reduce((n, v) => n + v.recent.requests, 0);
      // and a step in which the queue's depth was sampled is over (one each 2 s, shown once past)
      const sampled = versionsOf(d, "digits").some((v) =>
        v.recent.points.some((p) => p.depth !== null),
      );
      return digits === 60 && lm === 3 && sampled;
    }, 20_000);

    const digits = versionsOf(d, "digits").filter((v) => v.recent.requests > 0);
    for (const v of digits) {
      expect(v.recent.p50_ms).toBeGreaterThan(0);
      expect(v.recent.p99_ms).toBeGreaterThanOrEqual(v.recent.p50_ms ?? 0);
      const slow = v.recent.slowest;
      expect(slow.length).toBeGreaterThan(0);
      for (const r of slow) {
        expect(sent.has(r.id)).toBe(true);
        expect(r.batch_ms).toBeGreaterThanOrEqual(0);
        expect(r.compute_ms).toBeGreaterThan(0);
        expect(r.queue_ms).toBeGreaterThanOrEqual(0);
        // the parts were measured inside the total (the worker's clock, within a millisecond)
        expect((r.batch_ms ?? 0) + (r.compute_ms ?? 0)).toBeLessThanOrEqual(r.total_ms + 1);
      }
    }
    const lm = versionsOf(d, "tiny-lm").find((v) => v.recent.requests > 0);
    expect(lm?.recent.slowest).toHaveLength(3);
    expect(lm?.recent.slowest.reduce((n, r) => n + (r.tokens ?? 0), 0)).toBe(tokens);
    for (const r of lm?.recent.slowest ?? []) {
      expect(r.ttft_ms).toBeGreaterThan(0);
      expect(r.ttft_ms).toBeLessThanOrEqual(r.total_ms);
    }
    expect(lm?.recent.points.some((p) => p.tokens_per_s > 0)).toBe(true);
    // the queues were sampled while they had work
    expect(digits.some((v) => v.recent.points.some((p) => p.depth !== null))).toBe(true);
  });

  it("draws the charts and the slowest requests, and every card fits a 1280 px screen and a phone", async () => {
    await page.goto(stack.url("/dashboard"));
    await page.getByTestId("admin-token").fill(ADMIN);
    await page.getByTestId("admin-login").click();
    const version = versionsOf(await dashboard(), "digits").find((v) => v.recent.requests > 0);
    const card = page.getByTestId(`version-digits-${version?.version}`);
    await expect
      .poll(
        async () =>
          Number(
            await card
              .locator('[data-testid="chart"][data-title="requests/s"]')
              .getAttribute("data-max"),
          ),
        { timeout: 10_000 },
      )
      .toBeGreaterThan(0);
    expect(await card.locator('[data-testid="chart"] path.line').count()).toBeGreaterThanOrEqual(3);
    expect(await card.locator('[data-testid="slowest"] tbody tr').count()).toBeGreaterThan(0);
    const lmCard = page.locator('[data-testid^="version-tiny-lm-"]').filter({
      has: page.locator('[data-testid="slowest"]'),
    });
    expect(await lmCard.locator('[data-testid="chart"][data-title="tokens/s"]').count()).toBe(1);
    expect(await lmCard.locator('[data-testid="slowest"] th').allTextContents()).toContain(
      "TTFT ms",
    );
    // the overview's p50 is a quantile to two figures, not a bucket bound
    expect(await page.getByTestId("dashboard-rows").textContent()).toMatch(/digits/);
    expect(await overflow()).toEqual({ cards: [], page: false });
    await page.screenshot({ path: `${SHOTS}/dashboard-1280.png`, fullPage: true });
    // the check sees an overflow where there is one: a block wider than any card, put in one
    await page.evaluate(`(() => {
      const wide = document.createElement("div");
      wide.id = "too-wide";
      wide.style.width = "2000px";
      document.querySelector("#board").append(wide);
    })()`);
    expect((await overflow()).cards).toHaveLength(1);
    await page.evaluate(`document.querySelector("#too-wide").remove()`);

    await page.setViewportSize({ width: 375, height: 800 });
    // a refresh redraws at the new width
    await page.waitForTimeout(1_500);
    expect(await card.locator('[data-testid="slowest"] tbody tr').count()).toBeGreaterThan(0);
    expect(await overflow()).toEqual({ cards: [], page: false });
    await page.screenshot({ path: `${SHOTS}/dashboard-375.png` });
    // (no screenshot of the card alone: the dashboard redraws it each poll, and a screenshot of
    // a card replaced meanwhile fails as detached; the page's shows it)
    expect(consoleErrors).toEqual([]);
  });

  it("says so when the server stops answering, dimming what it said last, and recovers", async () => {
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(stack.url("/dashboard"));
    const updated = page.locator("#updated");
    await expect.poll(() => updated.textContent(), { timeout: 5_000 }).toMatch(/^updated /);
    // the server gone (a stopped stack, a network that dropped): its polls fail outright
    await page.route("**/admin/dashboard", (route) => route.abort());
    await expect
      .poll(() => updated.textContent(), { timeout: 5_000 })
      .toMatch(/^the server does not answer since .+; showing \S+/);
    expect(await page.evaluate(`document.body.classList.contains("stale")`)).toBe(true);
    expect(await page.getByTestId("dashboard-rows").textContent()).toMatch(/digits/);
    await page.unroute("**/admin/dashboard");
    await expect.poll(() => updated.textContent(), { timeout: 5_000 }).toMatch(/^updated /);
    expect(await page.evaluate(`document.body.classList.contains("stale")`)).toBe(false);
    const errorsBefore = consoleErrors.length;
    // a server that hangs (stopped, not gone), and a page in place of its answer (a proxy's)
    await page.route("**/admin/dashboard", () => {});
    await expect
      .poll(() => updated.textContent(), { timeout: 8_000 })
      .toMatch(/^the server does not answer since /);
    await page.unroute("**/admin/dashboard");
    await expect.poll(() => updated.textContent(), { timeout: 8_000 }).toMatch(/^updated /);
    await page.route("**/admin/dashboard", (route) =>
      route.fulfill({ status: 200, contentType: "text/html", body: "<html>proxy</html>" }),
    );
    await expect
      .poll(() => updated.textContent(), { timeout: 5_000 })
      .toMatch(/^the server does not answer since /);
    await page.unroute("**/admin/dashboard");
    await expect.poll(() => updated.textContent(), { timeout: 5_000 }).toMatch(/^updated /);
    // no script error on the way: the browser's own lines for failed loads only
    expect(
      consoleErrors.slice(errorsBefore).filter((e) => !/Failed to load resource|net::ERR/.test(e)),
    ).toEqual([]);
  });
});
