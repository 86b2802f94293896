import { randomUUID } from "node:crypto";
import {
  type CancelMessage,
  type ControlMessage,
  cancelMessageSchema,
  parseControlMessage,
  type ReloadOutcome,
  reloadOutcomeSchema,
  WIRE_VERSION,
} from "@ferry/protocol";
import type { ChainableCommander } from "ioredis";
import type { ChannelMux } from "./channel-mux.js";
import type { RedisClient } from "./connection.js";
import type { Keys } from "./keys.js";

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
   * Asks every worker to reload `model` and collects their answers, until `expected` have
   * answered or `timeoutMs` passes.
   */
  async requestReload(
    model: string,
    expected: number,
    timeoutMs = 60_000,
  ): Promise<ReloadOutcome[]> {
    const reply = `${this.keys.prefix}:reload-acks:${randomUUID()}`;
    const answers: ReloadOutcome[] = [];
    let done: () => void = () => {};
    const finished = new Promise<void>((resolve) => {
      done = resolve;
    });
    const unlisten = await this.mux.listen(reply, (raw) => {
      const answer = reloadOutcomeSchema.safeParse(parseJson(raw));
      if (answer.success) answers.push(answer.data);
      if (answers.length >= expected) done();
    });
    let timer: NodeJS.Timeout | undefined;
    try {
      const message: ControlMessage = { v: WIRE_VERSION, type: "reload", model, reply };
      await this.redis.publish(this.keys.configChannel, JSON.stringify(message));
      if (expected > 0)
        await Promise.race([
          finished,
          new Promise((resolve) => {
            timer = setTimeout(resolve, timeoutMs);
          }),
        ]);
      return answers;
    } finally {
      clearTimeout(timer);
      unlisten();
    }
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
