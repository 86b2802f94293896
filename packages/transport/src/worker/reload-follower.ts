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
 * Returns what the worker tells, once a model starts serving, so that its generation is known.
 */
export function followReloads(
  control: ControlChannel,
  redis: RedisClient,
  keys: Keys,
  workerId: string,
  handler: ReloadHandler,
  servedModels: () => string[],
): (model: string) => void {
  const answer = (reply: string, outcome: Omit<ReloadOutcome, "worker">) =>
    void control.answerReload(reply, { ...outcome, worker: workerId }).catch(() => undefined);
  const seen = new Map<string, number>();
  const generationOf = async (model: string) =>
    Number((await redis.get(keys.generation(model))) ?? 0);
  const catchUp = async (model: string) => {
    seen.set(model, await generationOf(model));
    await handler.reload(model);
  };
  // The generation each model was served at, read when it starts serving (a worker listens
  // from its first moment, before its models load): a model left out would be reloaded on
  // every resubscription, outside any consensus, from whatever its files on disk are then.
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
  return serving;
}
