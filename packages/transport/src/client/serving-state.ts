import { type ControlMessage, FerryError, WIRE_VERSION } from "@ferry/protocol";
import type { RedisClient } from "../shared/connection.js";
import type { ControlChannel } from "../shared/control-channel.js";
import type { Keys } from "../shared/keys.js";
import { LuaCommand } from "../shared/lua-command.js";

/**
 * A reload committed this long ago whose generation has not moved was left by an API that
 * died: past the longest a commit waits for the workers' swaps (60 s), in ms.
 */
export const INTERRUPTED_RELOAD_MS = 120_000;

/**
 * Moves a model's generation if its reload was committed before the cutoff and is not yet
 * finished, with the broadcast that tells every replica and worker.
 * KEYS: commit marker, generation. ARGV: cutoff (epoch ms), config channel, message.
 */
const FINISH_RELOAD = `
local at = tonumber(redis.call('GET', KEYS[1]))
if not at or at > tonumber(ARGV[1]) then return 0 end
redis.call('INCR', KEYS[2])
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
`;

/**
 * Serving configuration every API replica shares through Redis: traffic splits (cached per
 * replica, dropped at once on a config broadcast), each model's reload generation and the
 * reloads under way. Its counts are `ServingStats`'.
 */
export class ServingState {
  private readonly traffic = new Map<string, Record<string, number> | null>();
  private readonly generations = new Map<string, number>();
  /**
   * The last generation read of every model this replica has looked at, kept past the
   * broadcasts that drop `generations`: after a lost subscription, a model whose generation
   * moved meanwhile had a reload this replica did not hear of.
   */
  private readonly watched = new Map<string, number>();
  /**
   * Models whose reload was committed (the workers swap) and whose generation has not moved
   * yet, as this replica heard or read it: their cached answers may be the replaced files'.
   */
  private readonly committed = new Set<string>();
  /** Broadcasts applied per model: a read that one overtook is not kept (see `generation`). */
  private readonly heard = new Map<string, number>();
  private readonly listeners: Array<(message: ControlMessage) => void> = [];

  private readonly finishReload: LuaCommand<number>;

  constructor(
    private readonly redis: RedisClient,
    private readonly control: ControlChannel,
    private readonly keys: Keys,
  ) {
    control.onResubscribed(() => void this.resync().catch(() => undefined));
    this.finishReload = new LuaCommand(redis, "ferryFinishReload", 2, FINISH_RELOAD);
  }

  async start(): Promise<void> {
    await this.control.listen((message) => this.apply(message));
  }

  private apply(message: ControlMessage): void {
    if (message.type === "reload-decision") {
      if (message.commit) this.committed.add(message.model);
      return;
    }
    if (message.type !== "traffic" && message.type !== "generation") return;
    this.heard.set(message.model, (this.heard.get(message.model) ?? 0) + 1);
    this.traffic.delete(message.model);
    this.generations.delete(message.model);
    if (message.type === "generation") this.committed.delete(message.model);
    for (const listener of this.listeners) listener(message);
  }

  /**
   * Whether a reload of the model was committed and its generation has not moved yet: its
   * cached answers may come from the files being replaced (until the committing API moves it,
   * or, if it died, another replica does; see `finishInterruptedReloads`). Known once the
   * model's generation has been read (`generation`).
   */
  reloadCommitted(model: string): boolean {
    return this.committed.has(model);
  }

  /**
   * After a lost subscription the broadcasts sent meanwhile were missed: every split is read
   * again at its next use, and a model whose generation moved is handled as its broadcast
   * would have been (no answer cached from the replaced files served, its versions re-read).
   * Without this a replica that missed a rollback kept routing to the canary until restarted.
   */
  private async resync(): Promise<void> {
    this.traffic.clear();
    await Promise.all(
      [...this.watched].map(async ([model, seen]) => {
        const [raw, committedAt] = await this.redis.mget(
          this.keys.generation(model),
          this.keys.reloadCommit(model),
        );
        const now = Number(raw ?? 0);
        if (now !== seen) {
          this.watched.set(model, now);
          this.apply({ v: WIRE_VERSION, type: "generation", model });
        }
        // a commit missed meanwhile whose generation has not moved yet (after the move above,
        // which ends the commit before it)
        if (committedAt !== null) this.committed.add(model);
      }),
    );
  }

  /**
   * Moves the generation of every model whose reload was committed by an API that died before
   * it moved it (its marker older than any commit's wait): until then the workers served the
   * new files while the replicas routed to the versions they knew. Any replica does it, once
   * (one script); returns the models it finished. Only models this replica knows committed
   * are looked at (it heard the decision, or read the marker with the generation or on a
   * resubscription): nothing is sent to Redis between reloads.
   */
  async finishInterruptedReloads(now = Date.now()): Promise<string[]> {
    const finished: string[] = [];
    for (const model of [...this.committed]) {
      const message: ControlMessage = { v: WIRE_VERSION, type: "generation", model };
      const moved = await this.finishReload.run(
        this.redis,
        this.keys.reloadCommit(model),
        this.keys.generation(model),
        now - INTERRUPTED_RELOAD_MS,
        this.keys.configChannel,
        JSON.stringify(message),
      );
      if (moved === 1) finished.push(model);
    }
    return finished;
  }

  /** Called with every config change (after what this replica cached of it is dropped). */
  onConfigChange(listener: (message: ControlMessage) => void): void {
    this.listeners.push(listener);
  }

  /** The model's split, or null when none was set (the stable version takes everything). */
  async getTraffic(model: string): Promise<Record<string, number> | null> {
    if (this.traffic.has(model)) return this.traffic.get(model) ?? null;
    const raw = await this.redis.hgetall(this.keys.traffic(model)).catch(redisUnavailable);
    const split =
      Object.keys(raw).length === 0
        ? null
        : Object.fromEntries(Object.entries(raw).map(([v, w]) => [v, Number(w)]));
    this.traffic.set(model, split);
    return split;
  }

  /**
   * The model's generation: bumped by every reload and part of every cache key, so that no
   * answer cached from files a reload replaced is served again (even one stored by a request
   * that was in flight during the reload).
   */
  async generation(model: string): Promise<number> {
    const known = this.generations.get(model);
    if (known !== undefined) return known;
    const heard = this.heard.get(model) ?? 0;
    // not 0 on an error: kept, it would key this replica's cache to answers from before
    // every reload until the next one
    const [raw, committedAt] = await this.redis
      .mget(this.keys.generation(model), this.keys.reloadCommit(model))
      .catch(redisUnavailable);
    const value = Number(raw ?? 0);
    // A broadcast applied while the read was out may be newer than what it read (the reply
    // and the broadcast come over two connections, in either order): kept, the value read
    // before a reload would key this replica's cache to the old files' answers until the next.
    if ((this.heard.get(model) ?? 0) !== heard) return value;
    this.generations.set(model, value);
    this.watched.set(model, value);
    // a replica that started (or lost its subscription) after a commit learns of it here
    if (committedAt !== null) this.committed.add(model);
    return value;
  }

  /** Reads the generation of each of `models`, so that a reload missed later is noticed. */
  async watchGenerations(models: readonly string[]): Promise<void> {
    await Promise.all(models.map((model) => this.generation(model)));
  }

  /** Moves the generation once a committed reload has swapped in everywhere (its marker gone). */
  async bumpGeneration(model: string): Promise<void> {
    const tx = this.redis
      .multi()
      .incr(this.keys.generation(model))
      .del(this.keys.reloadCommit(model));
    await this.control.announce(tx, { v: WIRE_VERSION, type: "generation", model }).exec();
    this.generations.delete(model);
  }

  /** Replaces the split in one transaction and tells every replica. */
  async setTraffic(model: string, split: Record<string, number>): Promise<void> {
    const tx = this.redis
      .multi()
      .del(this.keys.traffic(model))
      .hset(this.keys.traffic(model), split);
    await this.control.announce(tx, { v: WIRE_VERSION, type: "traffic", model }).exec();
    this.traffic.delete(model);
  }
}

function redisUnavailable(err: unknown): never {
  throw new FerryError(
    "UNAVAILABLE",
    `Redis error: ${err instanceof Error ? err.message : String(err)}`,
    { retryAfterS: 1 },
  );
}
