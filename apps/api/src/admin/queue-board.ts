import { lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createBullBoard } from "@bull-board/api";
import { HonoAdapter } from "@bull-board/hono";
import { processAlive, queueName } from "@ferry/protocol";
import { serveStatic } from "@hono/node-server/serve-static";
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { HonoEnv, Services } from "../services.js";

const BASE = "/admin/queues";

/** This process's copy of the board's template, once written. */
let views: string | undefined;

const PREFIX = "ferry-board-";
/** A directory without its owner's pid (written by an older Ferry) this old is left over, in ms. */
const UNOWNED_STALE_MS = 60 * 60 * 1000;

/**
 * bull-board's page template without its link to Google's font service: Ferry's pages load
 * nothing from another host (they work offline; the board falls back to system fonts). The
 * board renders it from a directory on every page (an EJS template runs as code, so the
 * directory is this process's own, not a shared name in /tmp): one a process, removed when it
 * exits (one had been left behind per start).
 */
function offlineViews(): string {
  if (views) return views;
  const ui = dirname(createRequire(import.meta.url).resolve("@bull-board/ui/package.json"));
  const template = readFileSync(join(ui, "dist", "index.ejs"), "utf8");
  sweepBoardDirs(tmpdir());
  const dir = mkdtempSync(join(tmpdir(), PREFIX));
  writeFileSync(join(dir, "pid"), String(process.pid));
  writeFileSync(
    join(dir, "index.ejs"),
    template.replace(/<link[^>]*fonts\.googleapis\.com[^>]*>\s*/g, ""),
  );
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  views = dir;
  return dir;
}

/**
 * Removes the board directories in `root` of API processes that ended without their exit
 * handler (kill -9, the OOM killer: a test run had left 244): this user's own, whose process
 * is gone, or, without a pid, an hour old.
 */
export function sweepBoardDirs(root: string, now = Date.now()): void {
  const uid = process.getuid?.();
  for (const name of readdirSync(root)) {
    if (!name.startsWith(PREFIX)) continue;
    const dir = join(root, name);
    try {
      const stat = lstatSync(dir);
      if (!stat.isDirectory() || (uid !== undefined && stat.uid !== uid)) continue;
      let pid: number | undefined;
      try {
        pid = Number(readFileSync(join(dir, "pid"), "utf8"));
      } catch {
        if (now - stat.mtimeMs < UNOWNED_STALE_MS) continue;
      }
      if (pid !== undefined && Number.isInteger(pid) && pid > 0 && processAlive(pid)) continue;
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // gone meanwhile (its process's exit, another start's sweep)
    }
  }
}

/** Every model version's queue, by name: what the board shows. */
function queueNames(services: Services): string[] {
  return services.repository
    .list()
    .flatMap((entry) => entry.versions.map((v) => queueName(entry.config.name, v)));
}

/**
 * bull-board at /admin/queues, behind the admin token like the rest of /admin (a browser
 * signed in at /dashboard gets in by its cookie). Its page and assets come from
 * @bull-board/ui, served locally. Returns a refresh for when a reload adds versions.
 */
export function registerQueueBoard(app: OpenAPIHono<HonoEnv>, services: Services): () => void {
  const adapter = new HonoAdapter(serveStatic);
  const board = createBullBoard({
    queues: services.client.queueBoard(queueNames(services)),
    serverAdapter: adapter,
    options: { uiConfig: { boardTitle: "Ferry queues" } },
  });
  adapter.setBasePath(BASE);
  adapter.setViewsPath(offlineViews());
  app.route(BASE, adapter.registerPlugin());
  return () => board.replaceQueues(services.client.queueBoard(queueNames(services)));
}
