/**
 * Lua: the turn of a priority's first waiting job in BullMQ's prioritized set (0 with none),
 * which BullMQ scores priority * 2^32 + order of arrival: where a key with nothing waiting
 * starts (`OwnerShare`'s jobs, `ChunkTurns`' chunks). `base`: the priority's first BullMQ
 * priority (`bullPriority(p, 0)`); `turns`: the turns a priority has.
 */
export const FIRST_WAITING_TURN = `
local function firstWaitingTurn(prioritized, base, turns)
  local shift = 4294967296
  local first = redis.call('ZRANGEBYSCORE', prioritized, string.format('%.0f', base * shift),
    '(' .. string.format('%.0f', (base + turns) * shift), 'WITHSCORES', 'LIMIT', 0, 1)
  if #first > 0 then return math.floor(tonumber(first[2]) / shift) - base end
  return 0
end`;
