// The file store's Lua scripts (`FileStore`): each keeps a file's keys in step in one call.

/**
 * Appends one chunk of whole lines, unless one of its lines' custom_ids was seen before in
 * this file: then nothing is appended, and the index of the first repeated id is returned
 * (-1: appended; -2: the file is gone, discarded or expired meanwhile; -3: another writer
 * began it again since). KEYS: file, chunks, ids, packed. ARGV: ttl, bytes, lines, chunk,
 * writer ("" for a file with one writer), the chunk's lines packed: their head ("" for none)
 * and their rows, custom_id...
 */
export const APPEND = `
if redis.call('EXISTS', KEYS[1]) == 0 then return -2 end
if ARGV[5] ~= '' and redis.call('HGET', KEYS[1], 'writer') ~= ARGV[5] then return -3 end
for i = 8, #ARGV do
  if redis.call('SADD', KEYS[3], ARGV[i]) == 0 then return i - 8 end
end
local chunks = redis.call('RPUSH', KEYS[2], ARGV[4])
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[4], 'h' .. (chunks - 1), ARGV[6], 'r' .. (chunks - 1), ARGV[7])
end
redis.call('HINCRBY', KEYS[1], 'bytes', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'lines', ARGV[3])
for i = 1, 4 do redis.call('EXPIRE', KEYS[i], ARGV[1]) end
return -1
`;

/**
 * Marks a file whole, unless it is gone meanwhile (nothing is then written: a key without
 * its TTL would be left) or another writer began it again; it is kept the TTL from now (a
 * batch's output file is begun when its run starts, hours before it may be whole). KEYS:
 * file, ids, chunks, packed. ARGV: urls (JSON), writer ("" for any), ttl, expires_at, the
 * upload's fingerprint ("" for none), then field/value pairs (a linked file's). Returns the
 * file's fields.
 */
export const FINISH = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if ARGV[2] ~= '' and redis.call('HGET', KEYS[1], 'writer') ~= ARGV[2] then return false end
redis.call('HSET', KEYS[1], 'status', 'processed', 'urls', ARGV[1], 'expires_at', ARGV[4])
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'fingerprint', ARGV[5]) end
for i = 6, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('DEL', KEYS[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[3], ARGV[3])
redis.call('EXPIRE', KEYS[4], ARGV[3])
return redis.call('HGETALL', KEYS[1])
`;

/**
 * Starts a file afresh unless a writer numbered higher than `writer` began it (a runner that
 * took the batch over began it after this one). KEYS: file, chunks, ids, packed. ARGV: ttl,
 * writer, then field/value pairs. Returns 1 when it began the file.
 */
export const BEGIN = `
local current = tonumber(redis.call('HGET', KEYS[1], 'writer') or '')
local writer = tonumber(ARGV[2])
if current and writer and current > writer then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
for i = 3, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
`;

/**
 * Deletes a file only while `writer` is the one that began it last. KEYS: file, chunks, ids,
 * packed. ARGV: writer. Returns the file's owner when it was deleted.
 */
export const DISCARD = `
if redis.call('HGET', KEYS[1], 'writer') ~= ARGV[1] then return false end
local owner = redis.call('HGET', KEYS[1], 'owner')
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return owner
`;

/**
 * Lets a file live at least `ttl` seconds from now (a batch that reads it may run that long).
 * KEYS: file, chunks, packed. ARGV: ttl, expires_at.
 */
export const KEEP = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('TTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
  redis.call('EXPIRE', KEYS[2], ARGV[1])
  redis.call('EXPIRE', KEYS[3], ARGV[1])
  redis.call('HSET', KEYS[1], 'expires_at', ARGV[2])
end
return 1
`;
