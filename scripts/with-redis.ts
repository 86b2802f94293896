// Runs a command with REDIS_URL pointing at a Redis that answers (see ensureRedis).
import { spawn } from "node:child_process";
import { ensureRedis } from "./redis-local.js";

const [command, ...args] = process.argv.slice(2);
if (!command) {
  console.error("usage: node --import tsx scripts/with-redis.ts <command> [args...]");
  process.exit(2);
}
const redis = await ensureRedis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
const child = spawn(command, args, {
  stdio: "inherit",
  env: { ...process.env, REDIS_URL: redis.url },
  shell: false,
});
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => child.kill(signal));
child.on("exit", (code, signal) => {
  void redis.stop().then(() => process.exit(code ?? (signal ? 1 : 0)));
});
