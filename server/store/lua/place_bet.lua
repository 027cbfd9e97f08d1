-- Place a batch of bets on one table, one after the other, each with the same checks, in the
-- same order, as MemoryStore.place_bet. A batch is the bets one node received for this table
-- in one turn of its event loop: one script call instead of one each saves Redis the call's
-- overhead, and reads the table's state, the clock and each spot's limits once. The script
-- is atomic, so every bet of a batch is judged at the same instant.
-- Its cost does not grow with the bets already placed: the limits read the player's running
-- stake on the spot, and the round's totals are running counters. It appends no event: the
-- table's owner publishes the totals (bet_totals), so nobody sees who bet what.
-- Each bet placed appends a `bet` entry to the player's audit log (see lib.lua).
-- With an operator's wallet (server/store/outbox.py) the same checks, but the balance's, run
-- in one of two modes instead, and no money moves here: `hold` writes the bet's debit's hold
-- (the cancel unless recorded) to the outbox, due `extra` ms from now, and answers {'HELD'}
-- ({'IN_OUTBOX', state} if the debit is there already); `record` records the bet the wallet
-- debited (`extra` is the wallet's balance after), dropping its hold in the same step, or,
-- if a check fails now, queues the hold as a cancel ({'GONE'}: no hold left to drop).
-- KEYS: 1 state, 2 rounds, 3 ledger, 4 guests, 5 guest_ttl; then for bet i (from 0):
--       6 + 3i the player's balance (with a wallet: the wallet's latest balance), 7 + 3i the
--       player's in_play, 8 + 3i its audit log.
-- ARGV: 1 id, 2 prefix, 3 keep_rounds, 4 bets a player may place in one round, 5 audit ms
--       kept, 6 audit entries kept, 7 mode ('', 'hold' or 'record'), 8 the outbox's prefix;
--       then for bet i, from 9 + 5i (9 + 7i with a mode): player, bet_id, round ('' if not a
--       whole number), spot ('' if unknown), amount ('' unless a positive int), and with a
--       mode the debit's outbox key and `extra`.
-- Replies: one per bet, in order: {'OK', receipt} or a refusal with the values the caller
-- needs to explain it; {'BROKEN', reason} for a bet that a stored value kept from being
-- placed (a key of the wrong type, a value that is not an integer, a sum past 64 bits):
-- nothing of that bet was written, and the other bets of the batch go on.
local prefix = ARGV[2]
local max_bets = tonumber(ARGV[4])
local mode, outbox = ARGV[7], ARGV[8]
local stride = mode == '' and 5 or 7
local broken = false -- why no bet of this batch can be placed, if one of the table's keys is bad
local st = {}
if typed({KEYS[1], 'hash'}) then
  st = redis.call('HMGET', KEYS[1], 'phase', 'round', 'closes_at_ms')
else
  broken = 'the table state key is not a hash'
end
local ts = now_ms()
local open = st[1] == 'betting' and ts < (tonumber(st[3]) or 0)
local round = st[2] or '' -- none if the table is unknown
local round_no = tonumber(round) -- for the receipts and the audit entries
-- A receipt, msgpack [table, round, bet_id, spot, amount, balance after], and an audit entry,
-- lib.lua's audit_entry('bet', table, round, bet_id, -amount, balance after, ts), are the
-- same bytes as packing the arrays: the array's header (0x96, 0x97: fixarray of 6, 7), the
-- values the batch shares, packed once, then the bet's own (cmsgpack.pack of several values
-- is their packs joined). Only read for a bet placed, whose round is a number.
local receipt_head = '\150' .. cmsgpack.pack(ARGV[1], round_no or false)
local audit_head = '\151' .. cmsgpack.pack('bet', ARGV[1], round_no or false)
-- The round's keys, named once a batch. A player's stakes this round are its own small hash
-- (`stake:<r>:<player>`: `<spot>` and `all`), not fields of one round-wide hash: that hash,
-- a listpack up to 512 fields, cost a scan of it and a rewrite per read and per write, the
-- largest part of a bet's cost with a few hundred players. `stakes:<r>` is that older layout,
-- only read (a round open across the upgrade keeps counting its stakes) and deleted.
local stakes = prefix .. 'stakes:' .. round
local stake_of = prefix .. 'stake:' .. round .. ':'
local bettors = prefix .. 'bettors:' .. round -- the players who bet, for forget_round
local totals = prefix .. 'totals:' .. round
-- The receipts: one table-wide hash, `<player's length>:<player>:<bet_id>` -> the bet's
-- receipt (one HSET a bet), and the round's list of its fields (one RPUSH a batch), by which
-- forget_round deletes them. The older layout kept the round in a second hash
-- (`receipt_rounds`) and the receipt in `receipts:<r>`: still read while it holds any.
local bet_receipts = prefix .. 'bet_receipts'
local receipt_keys = prefix .. 'receipt_keys:' .. round
local receipt_rounds = prefix .. 'receipt_rounds'
local older_receipts = redis.call('EXISTS', receipt_rounds) == 1
local limits = {} -- spot -> {min, max} as HMGET gave them, read once a batch
local archived = false
local audited = {} -- the audit logs appended to: each given its expiry once, at the end
local trimmed = {} -- the audit logs checked (and trimmed by age) in this batch, see place()
local audit_floor = ts - tonumber(ARGV[5]) -- entries older than this are past keep_ms
-- What every accepted bet adds to the ledger, the round's totals and its list of bets,
-- written at the end of the batch (nothing in the batch reads them), or before a sum would
-- reach 2^53, past which Lua's doubles are no longer exact.
local staked, added, records, fields = 0, {bets = 0, bettors = 0}, {}, {}
local EXACT = 9007199254740992 -- 2^53
-- The ledger's and the round's totals' values once the bets placed so far are written
-- (exact, see lib.lua): a bet whose sums would leave 64 bits is not placed. When every one of
-- them is below 2^62 in magnitude (`roomy`, the rule), a batch moving less than 2^61 in all
-- cannot take one past 64 bits, and only `moved` is counted.
local after_sums, roomy, moved = {}, true, 0
local ROOM = 2305843009213693952 -- 2^61
-- The batch's players; player -> its guest TTL as read (false: no guest), and as a number.
local players, guest_ttls, guest_ttl_ms = {}, {}, {}
local sighted = {} -- player -> its new expiry: the guests whose bet was placed, ZADDed at the end
if not broken then
  local t = {rounds = KEYS[2], prefix = prefix, round = round, keep_rounds = tonumber(ARGV[3])}
  if not typed({KEYS[3], 'hash', KEYS[4], 'zset', KEYS[5], 'hash', stakes, 'hash', bettors,
      'list', totals, 'hash', prefix .. 'bets:' .. round, 'list', receipt_keys, 'list'})
      or not archivable(t)
      or (mode ~= '' and not typed({outbox .. 'due', 'zset', outbox .. 'age', 'zset'})) then
    broken = 'a key of the table, the round or the ledger has the wrong type'
  else
    local ledger = redis.call('HMGET', KEYS[3], 'balances', 'in_play')
    local fields = redis.call('HGETALL', totals)
    for i = 1, #fields, 2 do
      ledger[#ledger + 1] = fields[i + 1]
      after_sums['totals:' .. fields[i]] = exact(fields[i + 1])
    end
    after_sums.balances, after_sums.in_play = exact(ledger[1]), exact(ledger[2])
    for i = 0, (#ARGV - 8) / stride - 1 do
      players[i + 1] = ARGV[9 + stride * i]
    end
    -- Every player's guest TTL in one read (false: no guest): one call instead of one a bet.
    local ttls = redis.call('HMGET', KEYS[5], unpack(players)) -- at most BET_BATCH_MAX
    for i, player in ipairs(players) do
      guest_ttls[player], guest_ttl_ms[player] = ttls[i], tonumber(ttls[i])
    end
    for _, value in ipairs(ledger) do
      local v = exact(value)
      if not v then
        broken = 'a ledger or round total is not an integer'
      elseif v[1] >= 4611686018 or v[1] < -4611686018 then -- 2^62 = 4611686018.4e9
        roomy = false
      end
    end
  end
end

local function write_sums()
  if #records > 0 then
    if staked > 0 then -- none with a wallet: its money is not here
      redis.call('HINCRBY', KEYS[3], 'balances', int(-staked))
      redis.call('HINCRBY', KEYS[3], 'in_play', int(staked))
    end
    redis.call('RPUSH', prefix .. 'bets:' .. round, unpack(records)) -- at most BET_BATCH_MAX
    redis.call('RPUSH', receipt_keys, unpack(fields))
    for name, value in pairs(added) do
      if value > 0 then
        redis.call('HINCRBY', totals, name, int(value))
      end
    end
  end
  staked, added, records, fields = 0, {bets = 0, bettors = 0}, {}, {}
end

-- A debit's hold becomes a cancel to send now (the bet will not be recorded).
local function queue_hold(key)
  local entry = outbox .. 'e:' .. key
  if typed({entry, 'hash'}) and redis.call('HGET', entry, 'state') == 'hold' then
    redis.call('HSET', entry, 'state', 'queued', 'created', int(ts))
    redis.call('ZADD', outbox .. 'due', int(ts), key)
    redis.call('ZADD', outbox .. 'age', int(ts), key)
  end
end

local function drop_hold(key)
  redis.call('DEL', outbox .. 'e:' .. key)
  redis.call('ZREM', outbox .. 'due', key)
end

local function place(balance_key, in_play_key, audit_key, player, bet_id, round_arg, spot,
    amount_arg, key, extra)
  if mode ~= '' and not typed({outbox .. 'e:' .. key, 'hash'}) then
    return {'BROKEN', "the debit's outbox entry is not a hash"}
  end
  local hold = mode == 'record' and redis.call('HGET', outbox .. 'e:' .. key, 'state')
  if mode == 'record' and hold ~= 'hold' then
    return {'GONE'} -- a sender took the hold: the debit is being cancelled
  end
  -- The player's length first, so no two (player, bet_id) pairs share a field.
  local receipt_field = #player .. ':' .. player .. ':' .. bet_id
  local receipt = redis.call('HGET', bet_receipts, receipt_field)
  if not receipt and older_receipts then
    local held = redis.call('HGET', receipt_rounds, receipt_field)
    receipt = held and redis.call('HGET', prefix .. 'receipts:' .. held, receipt_field)
  end
  if receipt then
    if hold then -- recorded already (the same debit): nothing to cancel
      drop_hold(key)
    end
    return {'OK', receipt} -- the same bet_id again: the first answer, no second debit
  end
  if broken then
    return {'BROKEN', broken}
  end
  if not st[1] then
    return {'UNKNOWN_TABLE'}
  end
  if not open then
    return {'CLOSED'} -- verify_bet_window, judged by Redis's clock
  end
  if round_arg ~= round then
    return {'ROUND', round}
  end
  if spot == '' then
    return {'SPOT'}
  end
  -- A key of the wrong type fails the reads below, before any write of this bet: the pcall
  -- around place() answers BROKEN.
  local mine = prefix .. 'mine:' .. round .. ':' .. player
  if redis.call('LLEN', mine) >= max_bets then
    return {'TOO_MANY', ARGV[4]}
  end
  local amount = tonumber(amount_arg)
  local lim = limits[spot]
  if not lim then
    lim = redis.call('HMGET', KEYS[1], 'min:' .. spot, 'max:' .. spot)
    lim[3], lim[4] = tonumber(lim[1]), tonumber(lim[2]) -- read as numbers once too
    limits[spot] = lim
  end
  local stake_key = stake_of .. player
  local values = redis.call('HMGET', stake_key, spot, 'all')
  if not values[1] or not values[2] then -- none yet: maybe held in the older layout
    local legacy = redis.call('HMGET', stakes, spot .. ':' .. player, 'all:' .. player)
    values[1], values[2] = values[1] or legacy[1], values[2] or legacy[2]
  end
  local balance_text = redis.call('GET', balance_key)
  -- Each text read as a number once (tonumber of a text is a strtod): small() gives it.
  local read, nums = {values[1], values[2], balance_text}, {}
  for i = 1, 3 do
    nums[i] = small(read[i])
    if not nums[i] and not exact(read[i]) then
      return {'BROKEN', 'a balance or stake of the player is not an integer'}
    end
  end
  local on_spot = nums[1] or tonumber(values[1])
  local balance = nums[3] or tonumber(balance_text)
  balance = mode == '' and balance or EXACT -- a wallet's: not here
  -- verify_bet: amount, spot offered, cumulative minimum and maximum, balance
  if not amount or not lim[1] or on_spot + amount < lim[3]
      or on_spot + amount > lim[4] or amount > balance then
    return {'MONEY', lim[1] or '', lim[2] or '', int(on_spot), int(balance)}
  end
  -- Every sum this bet adds to, as it will be once written: none may leave 64 bits.
  local guest_ttl = guest_ttls[player]
  if guest_ttl and not guest_ttl_ms[player] then
    return {'BROKEN', "the player's guest ttl is not a number"}
  end
  -- The audit log must be a stream (or missing). Its age trim, once a batch, is that check:
  -- XTRIM fails on any other type, before any write of this bet, and what it removes is past
  -- keep_ms, which no read returns (audit.first_seq): a bet refused after it leaves nothing a
  -- read could see. One call where a TYPE before and an XTRIM after the append were two.
  if not trimmed[audit_key] then
    local trim = audit_floor > 0 and redis.pcall('XTRIM', audit_key, 'MINID', int(audit_floor))
    if (trim and type(trim) == 'table' and trim.err)
        or (not trim and not typed({audit_key, 'stream'})) then
      return {'BROKEN', "the player's audit log is not a stream"}
    end
    trimmed[audit_key] = true
  end
  -- The stake on the spot and on every spot grow by amount (false: a missing one): their
  -- new texts, exact (HSET, not HINCRBY: one call writes both).
  local stakes_after = {}
  for i, value in ipairs(values) do
    local v = nums[i]
    if v and amount < EXACT and v + amount < EXACT then
      stakes_after[i] = int(v + amount)
    else
      local after_sum = sum(value, amount_arg)
      if not after_sum then
        return {'BROKEN', 'a stake of the player would pass 64 bits'}
      end
      stakes_after[i] = text(after_sum)
    end
  end
  if roomy then
    if moved + amount >= ROOM then
      return {'BROKEN', 'this batch would move 2^61 or more'}
    end
    moved = moved + amount
  else
    local names = {'balances', 'in_play', 'totals:' .. spot, 'totals:bets', 'totals:bettors'}
    local deltas = {-amount, amount, amount, 1, 1}
    local sums = {}
    for i, name in ipairs(names) do
      sums[i] = sum(after_sums[name], deltas[i])
      if not sums[i] then
        return {'BROKEN', 'the ledger or a round total would pass 64 bits'}
      end
    end
    for i, name in ipairs(names) do
      after_sums[name] = sums[i]
    end
  end
  if mode == 'hold' then
    local entry = outbox .. 'e:' .. key
    local state = redis.call('HGET', entry, 'state')
    if state then
      return {'IN_OUTBOX', state} -- this debit is in flight, or being cancelled
    end
    local body = cmsgpack.pack({'cancel', ARGV[1], tonumber(round), player, amount,
      string.sub(key, 8), {}, false})
    redis.call('HSET', entry, 'body', body, 'state', 'hold', 'created', int(ts), 'attempts', 0)
    redis.call('ZADD', outbox .. 'due', int(ts + tonumber(extra)), key)
    return {'HELD'}
  end
  -- Checked. The first write of the bet is the one left that can fail (the stake in play,
  -- not read before: of the wrong type, not an integer, or overflowing): then nothing of the
  -- bet is written and the pcall around place() answers BROKEN. From there nothing can fail.
  if not archived then -- normally done by round_opened; makes sure this round is forgotten
    local t = table_context(ARGV[1], prefix, KEYS[1], nil, KEYS[2], nil, ARGV[3])
    t.round = round
    archive_round(t)
    archived = true
  end
  if staked + amount >= EXACT then
    write_sums()
  end
  local after
  if mode == '' then
    redis.call('INCRBY', in_play_key, amount_arg) -- the stake in play: a guest keeps till settled
    after = redis.call('DECRBY', balance_key, amount_arg)
    staked = staked + amount
  else -- recorded with the wallet's balance after the debit, its hold dropped
    redis.call('SET', balance_key, extra)
    after = tonumber(extra)
    drop_hold(key)
  end
  if guest_ttl then -- a bet is a sighting (written at the end, one ZADD a batch)
    sighted[player] = int(ts + guest_ttl_ms[player])
  end
  local record = cmsgpack.pack({bet_id, player, spot, amount})
  records[#records + 1] = record
  redis.call('RPUSH', mine, record) -- for snapshots
  -- 'all' (no spot is called 'all') is the player's stake on every spot this round: none
  -- before this bet, this is the player's first bet of the round.
  redis.call('HSET', stake_key, spot, stakes_after[1], 'all', stakes_after[2])
  if not values[2] or values[2] == '0' then
    added.bettors = added.bettors + 1
    redis.call('RPUSH', bettors, player)
  end
  added[spot] = (added[spot] or 0) + amount
  added.bets = added.bets + 1
  receipt = receipt_head .. cmsgpack.pack(bet_id, spot, amount, after)
  redis.call('HSET', bet_receipts, receipt_field, receipt)
  fields[#fields + 1] = receipt_field -- receipt_keys:<r>, written with the records
  if mode == '' then -- a wallet's money moves in its own books
    audited[audit_key] = true
    redis.call('XADD', audit_key, 'MAXLEN', ARGV[6], '*', 'a',
      audit_head .. cmsgpack.pack(bet_id, -amount, after, ts))
  end
  return {'OK', receipt}
end

-- Each bet is judged on its own: one that fails (a call failing on a key no check above
-- foresaw) is answered BROKEN, and the bets before and after it keep their own answers.
local replies = {}
for i = 0, (#ARGV - 8) / stride - 1 do
  local a = 9 + stride * i
  local ok, reply = pcall(place, KEYS[6 + 3 * i], KEYS[7 + 3 * i], KEYS[8 + 3 * i],
    ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6])
  if not ok then
    reply = {'BROKEN', type(reply) == 'table' and tostring(reply.err) or tostring(reply)}
  end
  if mode == 'record' and reply[1] ~= 'OK' and reply[1] ~= 'GONE' then
    queue_hold(ARGV[a + 5]) -- debited, but the bet cannot stand: its debit is cancelled
  end
  replies[i + 1] = reply
end
write_sums() -- checked bet by bet: cannot fail
local expiries = {}
for player, expiry in pairs(sighted) do
  expiries[#expiries + 1] = expiry
  expiries[#expiries + 1] = player
end
if #expiries > 0 then -- the guests zset, checked once a batch: cannot fail
  redis.call('ZADD', KEYS[4], unpack(expiries))
end
for key in pairs(audited) do -- streams, checked and trimmed bet by bet: cannot fail
  redis.call('PEXPIRE', key, ARGV[5]) -- as lib.lua's audit_trim: an idle log expires
end
return replies
