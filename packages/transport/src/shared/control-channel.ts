import { randomUUID } from "node:crypto";
import {
  type CancelMessage,
  type ControlMessage,
  cancelMessageSchema,
  parseControlMessage,
  type ReloadOutcome,
  type ReloadSwapped,
  reloadOutcomeSchema,
  reloadSwappedSchema,
  WIRE_VERSION,
} from "@ferry/protocol";
import type { ChainableCommander } from "ioredis";
import type { ChannelMux } from "./channel-mux.js";
import type { RedisClient } from "./connection.js";
import type { Keys } from "./keys.js";
import { HEARTBEAT_INTERVAL_MS } from "./worker-registry.js";

/**
 * The control channel, for both sides: config broadcasts (traffic, generation), the reload
 * request and its answers, and job cancels. Whatever must reach every API replica and every
 * worker goes through here, as the typed messages of @ferry/protocol's control.ts.
 */
export class ControlChannel {
  constructor(
    private readonly redis: RedisClient,
    private readonly mux: ChannelMux,
    private readonly keys: Keys,
  ) {}

  /** Adds the broadcast to a MULTI, so that it goes out with the change it announces. */
  announce(tx: ChainableCommander, message: ControlMessage): ChainableCommander {
    return tx.publish(this.keys.configChannel, JSON.stringify(message));
  }

  /** Calls `listener` with every control message; resolves once subscribed. */
  listen(listener: (message: ControlMessage) => void): Promise<() => void> {
    return this.mux.listen(this.keys.configChannel, (raw) => {
      const message = parseControlMessage(raw);
      if (message) listener(message);
    });
  }

  /**
   * Calls `listener` once the channel is subscribed again after a lost connection (a restart,
   * a failover, a blip): whatever was broadcast in between was missed.
   */
  onResubscribed(listener: () => void): void {
    this.mux.onResubscribed(listener);
  }

  /**
   * Asks every worker to load what changed of `model` and collects their answers, until every
   * live worker has answered or `timeoutMs` passes. What they loaded is held until `decide`
   * tells them to swap it in (`commit`) or drop it; a commit resolves once every live worker
   * has answered and every one that held something has swapped it in (or `timeoutMs` passed
   * again), so that what follows it (the generation moved, the answer to the operator) comes
   * after every new file serves. `live` names the workers alive now (their heartbeats); it is
   * asked again every `recheckMs` while answers are awaited, so that a worker that died (or
   * was gone though still listed) stops being waited for once its heartbeat expires, rather
   * than holding the reload for the whole of `timeoutMs`, twice.
   */
  async requestReload(
    model: string,
    live: () => Promise<string[]>,
    {
      timeoutMs = 60_000,
      recheckMs = HEARTBEAT_INTERVAL_MS,
    }: { timeoutMs?: number; recheckMs?: number } = {},
  ): Promise<{ answers: ReloadOutcome[]; decide: (commit: boolean) => Promise<void> }> {
    const expected = new Set(await live());
    const reply = `${this.keys.prefix}:reload-acks:${randomUUID()}`;
    const answers: ReloadOutcome[] = [];
    const swapped = new Set<string>();
    let wake = () => {};
    const unlisten = await this.mux.listen(reply, (raw) => {
      const message = parseJson(raw);
      const answer = reloadOutcomeSchema.safeParse(message);
      if (answer.success) answers.push(answer.data);
      const swap = reloadSwappedSchema.safeParse(message);
      if (swap.success) swapped.add(swap.data.worker);
      wake();
    });
    // workers whose heartbeat expired while they were waited for (one that started after the
    // request and answered it is waited for too)
    const gone = new Set<string>();
    const recheck = async () => {
      let now: Set<string>;
      try {
        now = new Set(await live());
      } catch {
        return; // unknown: keep waiting for every worker
      }
      for (const id of [...expected, ...answers.map((a) => a.worker)])
        if (!now.has(id)) gone.add(id);
    };
    const until = async (holds: () => boolean): Promise<void> => {
      const end = performance.now() + timeoutMs;
      for (let left = timeoutMs; !holds() && left > 0; left = end - performance.now()) {
        let timer: NodeJS.Timeout | undefined;
        const woken = await new Promise<boolean>((resolve) => {
          wake = () => resolve(true);
          timer = setTimeout(() => resolve(false), Math.min(left, recheckMs));
        });
        clearTimeout(timer);
        if (!woken) await recheck();
      }
    };
    const answered = () => {
      const from = new Set(answers.map((a) => a.worker));
      for (const id of expected) if (!from.has(id) && !gone.has(id)) return false;
      return true;
    };
    const publish = (message: ControlMessage) =>
      this.redis.publish(this.keys.configChannel, JSON.stringify(message));
    try {
      await publish({ v: WIRE_VERSION, type: "reload", model, reply, prepare: true });
      await until(answered);
    } catch (err) {
      unlisten();
      throw err;
    }
    // A worker slower to load than `timeoutMs` still hears the decision after its load, and
    // swaps then: a commit also waits for it (its answer, then its swap), or the generation
    // would move while it still served the old files and their answers be cached as new. A
    // worker that died holding is not waited for: it serves nothing.
    const allSwapped = () =>
      answered() && answers.every((a) => !a.held || swapped.has(a.worker) || gone.has(a.worker));
    const decide = async (commit: boolean) => {
      try {
        // a commit leaves its marker in the same transaction: should this process die before
        // the generation moves, another API finishes the reload (ServingState)
        const tx = this.redis.multi();
        if (commit) tx.set(this.keys.reloadCommit(model), String(Date.now()));
        await this.announce(tx, {
          v: WIRE_VERSION,
          type: "reload-decision",
          model,
          reply,
          commit,
        }).exec();
        if (commit) await until(allSwapped);
      } finally {
        unlisten();
      }
    };
    return { answers: [...answers], decide };
  }

  /** A worker's answer to a committed reload it held, once swapped in. */
  async answerSwapped(reply: string, worker: string): Promise<void> {
    const message: ReloadSwapped = { worker, swapped: true };
    await this.redis.publish(reply, JSON.stringify(message));
  }

  /** A worker's answer to a reload request. */
  async answerReload(reply: string, outcome: ReloadOutcome): Promise<void> {
    await this.redis.publish(reply, JSON.stringify(outcome));
  }

  /** Adds the cancel broadcast for a job to a MULTI (beside the flag a late worker reads). */
  cancel(tx: ChainableCommander, jobId: string): ChainableCommander {
    const message: CancelMessage = { v: WIRE_VERSION, job: jobId };
    return tx.publish(this.keys.cancelChannel, JSON.stringify(message));
  }

  /** Calls `listener` with every cancelled job id; resolves once subscribed. */
  onCancel(listener: (jobId: string) => void): Promise<() => void> {
    return this.mux.listen(this.keys.cancelChannel, (raw) => {
      const message = cancelMessageSchema.safeParse(parseJson(raw));
      if (message.success) listener(message.data.job);
    });
  }
}

function parseJson(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}
