-- Hand out the wallet outbox's due entries (server/store/outbox.py), each claimed by one
-- sender until its claim ends: its time in the due set moves to then, so no other claim
-- takes it before (and any takes it after, if its sender died). A hold due is a debit no node
-- recorded or released in time: it becomes a cancel, queued, and is claimed like one.
-- KEYS: 1 due (zset: key -> ms), 2 age (zset: key -> created ms).
-- ARGV: 1 the entries' prefix, 2 owner, 3 claim ms, 4 most entries to claim.
-- Replies: {key, body, created, attempts} per entry claimed; {'BROKEN', reason} before any
-- write if a key has the wrong type.
if not typed({KEYS[1], 'zset', KEYS[2], 'zset'}) then
  return {'BROKEN', "the outbox's sets have the wrong type"}
end
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
for _, key in ipairs(due) do
  if not typed({ARGV[1] .. key, 'hash'}) then
    return {'BROKEN', 'the outbox entry ' .. key .. ' is not a hash'}
  end
end
local out = {}
for _, key in ipairs(due) do
  local entry = ARGV[1] .. key
  local f = redis.call('HMGET', entry, 'body', 'state', 'created', 'attempts')
  if f[2] == 'hold' then
    redis.call('HSET', entry, 'state', 'queued', 'created', int(now))
    redis.call('ZADD', KEYS[2], int(now), key)
    f[2], f[3] = 'queued', int(now)
  end
  if f[1] and f[2] == 'queued' then
    redis.call('HSET', entry, 'owner', ARGV[2])
    redis.call('ZADD', KEYS[1], int(now + tonumber(ARGV[3])), key)
    out[#out + 1] = {key, f[1], f[3], f[4]}
  else -- gone, or parked: not to be sent
    redis.call('ZREM', KEYS[1], key)
  end
end
return out
