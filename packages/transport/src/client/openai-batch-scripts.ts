// The Lua of OpenAiBatchStore: each step that reads and writes a batch's keys at once (its
// state hash and its answers' hash, one slot: the batch's id is their hash tag).

/**
 * Writes a batch unless it exists (a retry of its create finds the first). KEYS: batch.
 * ARGV: ttl, then field/value pairs.
 */
export const CREATE = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
for i = 2, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
`;

/**
 * Moves a batch to a status from one of `from` (a cancel never lands on a batch already
 * finalizing, a start never undoes a cancel), setting its moment once.
 * KEYS: batch. ARGV: to, moment field ("" for none), now, from...
 */
export const TRANSITION = `
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return 0 end
for i = 4, #ARGV do
  if ARGV[i] == status then
    redis.call('HSET', KEYS[1], 'status', ARGV[1])
    if ARGV[2] ~= '' then redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[3]) end
    return 1
  end
end
return 0
`;

/**
 * Lua that answers 0 for a batch gone, ending or ended: a runner that lost its batch while it
 * lived (another took it over) records nothing once the other finalizes it, so the counts stay
 * what the files hold; a line answered as a cancel lands is left out as cancelled.
 */
const ENDED = `
local status = redis.call('HGET', KEYS[1], 'status')
if not status or status == 'finalizing' or status == 'cancelling' or status == 'completed'
  or status == 'failed' or status == 'expired' or status == 'cancelled' then return 0 end
`;

/**
 * Keeps many lines' answers in one round trip, each kept and counted only the first time its
 * line is answered: a line run again after its runner died counts once and appears once. The
 * answers live as long as their batch. KEYS: batch, lines. ARGV: (index, ok, answer line) triples. Returns the lines
 * kept now.
 */
export const RECORD_MANY = `
${ENDED}local completed, failed = 0, 0
for i = 1, #ARGV, 3 do
  if redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 2]) == 1 then
    if ARGV[i + 1] == '1' then completed = completed + 1 else failed = failed + 1 end
  end
end
if completed > 0 then redis.call('HINCRBY', KEYS[1], 'completed', completed) end
if failed > 0 then redis.call('HINCRBY', KEYS[1], 'failed', failed) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return completed + failed
`;

/**
 * RECORD_MANY for a whole chunk of the input file answered at once: its answers kept as one value,
 * counted, only the first time the chunk is answered. KEYS: batch, lines. ARGV: chunk field,
 * lines answered 2xx, lines failed, the answers.
 */
export const RECORD_CHUNK = `
${ENDED}if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[4]) == 0 then return 0 end
if tonumber(ARGV[2]) > 0 then redis.call('HINCRBY', KEYS[1], 'completed', ARGV[2]) end
if tonumber(ARGV[3]) > 0 then redis.call('HINCRBY', KEYS[1], 'failed', ARGV[3]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1
`;

/**
 * Ends a batch: its final status and fields, kept `ttl` from now; its per-line answers go (its
 * files hold copies), or are kept as long, where its files are links to them ("keep"). A
 * finalizer (`writer`, its number) ends it only while it is the latest to have begun: one
 * that a takeover's finalizer followed would end the batch on files the other has begun
 * again. KEYS: batch, lines. ARGV: ttl, writer ("" for any), "keep" or "", then field/value
 * pairs. Returns 0 when it ended nothing.
 */
export const FINISH = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[2] ~= '' and redis.call('HGET', KEYS[1], 'finalizer') ~= ARGV[2] then return 0 end
for i = 4, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('EXPIRE', KEYS[1], ARGV[1])
if ARGV[3] == 'keep' then redis.call('EXPIRE', KEYS[2], ARGV[1]) else redis.call('DEL', KEYS[2]) end
return 1
`;

/**
 * Which of a run of lines have their answer, as a string of "0" and "1", then whether their
 * chunk has its answers kept whole: a runner taking a batch over skips those, without reading
 * the answers themselves. KEYS: lines. ARGV: first index, count, chunk field.
 */
export const ANSWERED = `
local marks = {}
for i = 0, tonumber(ARGV[2]) - 1 do
  local field = tostring(tonumber(ARGV[1]) + i)
  marks[i + 1] = redis.call('HEXISTS', KEYS[1], field) == 1 and '1' or '0'
end
marks[#marks + 1] = redis.call('HEXISTS', KEYS[1], ARGV[3]) == 1 and '1' or '0'
return table.concat(marks)
`;

/**
 * One HSCAN page of a hash's field names, without their values (HSCAN's NOVALUES is Redis
 * 7.4's): a batch's kept answers are ~50 MB for 100,000 lines. KEYS: the hash. ARGV: cursor,
 * count. Returns the next cursor and the names.
 */
export const SCAN_FIELDS = `
local page = redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', ARGV[2])
local names = {}
for i = 1, #page[2], 2 do names[#names + 1] = page[2][i] end
return {page[1], names}
`;
