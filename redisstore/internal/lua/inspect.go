package lua

import "github.com/redis/go-redis/v9"

// The inspection scripts: read only, for Store.Stats and Store.PurgePreview. Each looks at a
// bounded number of index entries per call; the caller resumes where it stopped.

// Count reads one bucket's update-ordered index from a ZRANGE BYLEX bound: KEYS index. ARGV
// record key base, member kind ('t': hex16 .. key in a tenant's index, with the tenant in
// ARGV[3]; else hex16 .. tenant .. NUL .. key), tenant, from (a BYLEX bound), entries to scan
// at most. It returns {last member scanned ("" for none), "1" when the index holds nothing
// after it, then tenant, tool, status and updated of each record it found...}.
var Count = redis.NewScript(prelude + `
local scan = tonumber(ARGV[5])
local ids = redis.call('ZRANGE', KEYS[1], ARGV[4], '+', 'BYLEX', 'LIMIT', 0, scan)
local out = {'', '0'}
if #ids < scan then out[2] = '1' end
for _, m in ipairs(ids) do
  out[1] = m
  local pk = string.sub(m, 17)
  if ARGV[2] == 't' then pk = ARGV[3] .. '\0' .. pk end
  local v = redis.call('HMGET', ARGV[1] .. pk, 't', 'tool', 'st', 'ua')
  if v[3] then
    out[#out + 1] = v[1]
    out[#out + 1] = v[2]
    out[#out + 1] = v[3]
    out[#out + 1] = v[4]
  end
end
return out
`)

// Preview counts, changing nothing, what one purge step would do in one bucket at now: KEYS the
// step's time index (exp, tomb or apexp). ARGV the hash key base (records or approvals), the
// step ('e' tombstone, 't' delete, 'a' approvals), now (µs, the server's TIME read by the
// caller), the offset of the first due entry to look at, at most this many. It judges each entry
// as Tombstone, Delete and PurgeApprovals do. It returns {entries looked at, the step's count,
// unsettled records (step 'e'), the creation time of the oldest of them ("" for none)}.
var Preview = redis.NewScript(prelude + `
local step, now = ARGV[2], tonumber(ARGV[3])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[3], 'LIMIT', tonumber(ARGV[4]), tonumber(ARGV[5]))
local n, unset, oldest = 0, 0, nil
for _, pk in ipairs(ids) do
  local h = ARGV[1] .. pk
  if step == 'e' then
    local r = redis.call('HMGET', h, 'st', 'tu', 'ca')
    if not r[1] or r[1] == 'expired' then
    elseif unsettled(r[1]) then
      unset = unset + 1
      local ca = tonumber(r[3])
      if not oldest or ca < oldest then oldest = ca end
    elseif now < tonumber(r[2]) then
      n = n + 1
    end
  elseif step == 't' then
    if not unsettled(redis.call('HGET', h, 'st')) then n = n + 1 end
  else
    local r = redis.call('HMGET', h, 'st', 'ea')
    if r[1] and r[1] ~= 'pending' and now >= tonumber(r[2]) then n = n + 1 end
  end
end
local o = ''
if oldest then o = fmt(oldest) end
return {#ids, n, unset, o}
`)
