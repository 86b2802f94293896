import type { ReloadOutcome } from "@ferry/protocol";
import type { RedisClient } from "../shared/connection.js";
import type { ControlChannel } from "../shared/control-channel.js";
import type { Keys } from "../shared/keys.js";
import type { ReloadHandler } from "./handlers.js";

/**
 * A worker's side of reloads on the control channel. A request (`reload`, with `prepare`)
 * has `handler` load what changed of the model and hold it; its outcome is this worker's
 * answer; the API's `reload-decision` swaps it in (answered "swapped") or drops it. A reload
 * this worker did not hear (its subscription down when it was asked or told) is made up: the
 * model's generation, bumped once a reload was committed, is broadcast and kept in Redis, and
 * a worker that hears the broadcast, or finds the generation of a model it serves moved once
 * it is subscribed again, reloads at once (a reload of what it already loaded loads nothing).
 * Returns what the worker tells before it reads a model's files and once the model serves, so
 * that the generation on record is the one its files were read at.
 */
export interface ReloadFollower {
  /**
   * Reads the model's generation before its files are read: a reload committed while they
   * load (this worker not listening) then shows as a move once it listens again.
   */
  loading(model: string): Promise<void>;
  /** The model serves: the generation `loading` read, if any, is the one it serves at. */
  serving(model: string): void;
}

export function followReloads(
  control: ControlChannel,
  redis: RedisClient,
  keys: Keys,
  workerId: string,
  handler: ReloadHandler,
  servedModels: () => string[],
): ReloadFollower {
  const answer = (reply: string, outcome: Omit<ReloadOutcome, "worker">) =>
    void control.answerReload(reply, { ...outcome, worker: workerId }).catch(() => undefined);
  const seen = new Map<string, number>();
  const generationOf = async (model: string) =>
    Number((await redis.get(keys.generation(model))) ?? 0);
  const catchUp = async (model: string) => {
    seen.set(model, await generationOf(model));
    await handler.reload(model);
  };
  // The generation each model was served at (a worker listens from its first moment, before
  // its models load): a model left out would be reloaded on every resubscription, outside any
  // consensus, from whatever its files on disk are then. Read here, after the load, only for a
  // model whose `loading` was not told: a reload committed meanwhile would be taken as seen.
  const serving = (model: string) => {
    if (seen.has(model)) return;
    void generationOf(model)
      .then((generation) => {
        if (!seen.has(model)) seen.set(model, generation);
      })
      .catch(() => undefined);
  };
  for (const model of new Set(servedModels())) serving(model);
  control.onResubscribed(() => {
    for (const model of new Set(servedModels()))
      void generationOf(model)
        .then((now) => (now === seen.get(model) ? undefined : catchUp(model)))
        .catch(() => undefined);
  });
  void control
    .listen((message) => {
      if (message.type === "generation") void catchUp(message.model).catch(() => undefined);
      if (message.type === "reload-decision")
        void handler
          .decide(message.reply, message.commit)
          .then((held) => {
            if (held && message.commit) return control.answerSwapped(message.reply, workerId);
          })
          .catch(() => undefined);
      if (message.type !== "reload") return;
      const loading = message.prepare
        ? handler.prepare(message.model, message.reply)
        : handler.reload(message.model);
      loading.then(
        (outcome) => answer(message.reply, outcome),
        (err: unknown) =>
          answer(message.reply, {
            model: message.model,
            loaded: [],
            unchanged: [],
            failed: [{ version: "*", error: String(err) }],
          }),
      );
    })
    .catch(() => undefined);
  // Only served models are compared on a resubscription, so a generation on record before
  // the model serves waits for it; a broadcast heard meanwhile moves it (`catchUp`).
  const loading = async (model: string) => {
    // unread (Redis away), the model's generation is read once it serves, as before
    const generation = await generationOf(model).catch(() => undefined);
    if (generation !== undefined && !seen.has(model)) seen.set(model, generation);
  };
  return { loading, serving };
}
