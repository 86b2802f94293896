// `npm start`: the whole local stack (API + one worker) in the foreground; `--only api|worker`
// starts one process alone for scaling out. Ctrl-C drains every child before exiting.
import { type ChildProcess, spawn } from "node:child_process";
import { ensureRedis } from "./redis-local.js";

const onlyAt = process.argv.indexOf("--only");
const only = onlyAt >= 0 ? process.argv[onlyAt + 1] : undefined;
if (only !== undefined && only !== "api" && only !== "worker") {
  console.error("usage: tsx scripts/start.ts [--only api|worker]");
  process.exit(2);
}
const redis = await ensureRedis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
const env = { ...process.env, REDIS_URL: redis.url };
const entries = { api: "apps/api/src/main.ts", worker: "apps/worker/src/main.ts" };
const names: Array<keyof typeof entries> = only ? [only] : ["worker", "api"];
const children: ChildProcess[] = names.map((name) =>
  spawn(process.execPath, ["--conditions=ferry-source", "--import", "tsx", entries[name]], {
    stdio: "inherit",
    env,
  }),
);

let exitCode = 0;
let stopping = false;
const stopAll = (signal: NodeJS.Signals) => {
  if (stopping) return;
  stopping = true;
  for (const child of children) if (child.exitCode === null) child.kill(signal);
};
process.on("SIGINT", () => stopAll("SIGINT"));
process.on("SIGTERM", () => stopAll("SIGTERM"));
await Promise.all(
  children.map(
    (child) =>
      new Promise<void>((resolve) =>
        child.on("exit", (code) => {
          if (code) exitCode = code;
          // One process dying takes the stack down rather than leaving half of it serving.
          stopAll("SIGTERM");
          resolve();
        }),
      ),
  ),
);
redis.stop();
process.exit(exitCode);
