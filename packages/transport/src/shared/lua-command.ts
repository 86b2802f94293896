import type { RedisClient } from "./connection.js";

type Arg = string | number | Buffer;

/**
 * A Lua script defined on a connection as a named command (ioredis' `defineCommand`, which
 * leaves the command untyped), called on the connection it was defined on. The untyped
 * lookup lives here, once.
 */
export class LuaCommand<Result> {
  constructor(
    redis: RedisClient,
    private readonly name: string,
    numberOfKeys: number,
    lua: string,
  ) {
    redis.defineCommand(name, { numberOfKeys, lua });
  }

  /** Runs the script: keys first, then arguments. */
  run(redis: RedisClient, ...args: Arg[]): Promise<Result> {
    return this.method(redis)(...args) as Promise<Result>;
  }

  private method(target: RedisClient): (...args: Arg[]) => unknown {
    const fn = (target as unknown as Record<string, ((...args: Arg[]) => unknown) | undefined>)[
      this.name
    ];
    if (!fn) throw new Error(`Lua command ${this.name} is not defined on this connection`);
    return fn.bind(target);
  }
}
