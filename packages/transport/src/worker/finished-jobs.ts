import type { Job, Worker } from "bullmq";
import type { RedisClient } from "../shared/connection.js";

/** Keys BullMQ keeps beside a job's hash: its log lines, and a parent's record of its children. */
const BESIDE_JOB = ["logs", "processed", "failed", "unsuccessful", "dependencies"];

/**
 * Gives each job `worker` finishes for good, and the keys beside it, a TTL of `ttlS` seconds
 * (or of the age it was queued to be kept, if shorter).
 * BullMQ's `removeOnComplete: { age }` removes a finished job only when a later job on its
 * queue finishes, so the last jobs of a queue that goes idle were kept forever; with a TTL
 * Redis removes them on time whatever the queue does next. (A hash's TTL survives the HSETs
 * BullMQ still makes to a finished job.)
 */
export function expireFinished(worker: Worker, redis: RedisClient, ttlS: number): void {
  const expire = (job: Job) => {
    const key = `${job.queueQualifiedName}:${job.id ?? ""}`;
    // a job kept less than JOB_TTL_S (a sync completion's SYNC_JOB_TTL_S) is kept that long
    const ttl = Math.min(ttlS, keptFor(job) ?? ttlS);
    const pipeline = redis.pipeline().expire(key, ttl);
    for (const beside of BESIDE_JOB) pipeline.expire(`${key}:${beside}`, ttl);
    void pipeline.exec().catch(() => undefined);
  };
  worker.on("completed", expire);
  worker.on("failed", (job) => {
    // a failure with attempts left is retried, and must keep its data until it runs again
    if (job)
      void job.isFailed().then(
        (failed) => failed && expire(job),
        () => undefined,
      );
  });
}

/** How long the job was queued to be kept once finished (`removeOnComplete: { age }`), in s. */
function keptFor(job: Job): number | undefined {
  const kept = job.opts.removeOnComplete;
  const age = typeof kept === "object" && "age" in kept ? kept.age : undefined;
  return typeof age === "number" && age > 0 ? age : undefined;
}
