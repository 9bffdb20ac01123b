package lua

import "github.com/redis/go-redis/v9"

// The grant scripts. A grant is one hash under the store's grants hash tag (GrantBase):
//
//	id, ns, t, tool, wf, rule, by, why
//	ca, xa       created at, expires at (µs)
//	ra, rby      revoked at (absent while not revoked), revoked by
//
// and the index gall (score created at, member id). A revoke also leaves a marker in every
// bucket (GrantMark: bucket base .. ":grev:" .. id, holding the time it was set), written before
// the grant's own ra: ApproveByGrant, which runs in the approval's bucket, refuses under a grant
// whose marker is there, so an approval decided under a grant is decided before its revoke
// returns, or refused.

// GrantFields are the grant's fields in the order GetGrants replies carry them.
var GrantFields = []string{"id", "ns", "t", "tool", "wf", "rule", "by", "why", "ca", "xa", "ra", "rby"}

// CreateGrant: KEYS grant, gall. ARGV id, namespace, tenant, tool, workflow ID, rule, created
// by, reason, duration (µs). It returns {now}.
var CreateGrant = redis.NewScript(prelude + `
local now = clock()
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'ns', ARGV[2], 't', ARGV[3], 'tool', ARGV[4], 'wf', ARGV[5], 'rule', ARGV[6],
  'by', ARGV[7], 'why', ARGV[8], 'ca', fmt(now), 'xa', fmt(now + tonumber(ARGV[9])), 'rby', '')
redis.call('ZADD', KEYS[2], now, ARGV[1])
return {fmt(now)}
`)

// GetGrants: KEYS gall. ARGV grant key base, then grant IDs ("" for none: every grant of the
// index, oldest first). It returns {now, then the fields of GrantFields of each grant found}.
var GetGrants = redis.NewScript(prelude + `
local names = {'id', 'ns', 't', 'tool', 'wf', 'rule', 'by', 'why', 'ca', 'xa', 'ra', 'rby'}
local ids = {}
if #ARGV > 1 then
  for i = 2, #ARGV do ids[#ids + 1] = ARGV[i] end
else
  ids = redis.call('ZRANGE', KEYS[1], 0, -1)
end
local r = {fmt(clock())}
for _, id in ipairs(ids) do
  local v = redis.call('HMGET', ARGV[1] .. id, unpack(names))
  if v[1] then
    for i = 1, #names do r[#r + 1] = v[i] end
  end
end
return r
`)

// MarkRevoked: KEYS marker. ARGV time to live (ms). It sets the marker to now unless it is set,
// and returns {now}.
var MarkRevoked = redis.NewScript(prelude + `
local now = clock()
redis.call('SET', KEYS[1], fmt(now), 'NX', 'PX', ARGV[1])
return {fmt(now)}
`)

// RevokeGrant: KEYS grant. ARGV revoked by. It writes ra and rby of an active grant (not revoked,
// not expired) and returns {code, now}: K revoked now, U unchanged, N no grant.
var RevokeGrant = redis.NewScript(prelude + `
local now = clock()
local v = redis.call('HMGET', KEYS[1], 'id', 'xa', 'ra')
if not v[1] then return {'N', fmt(now)} end
if v[3] or now >= tonumber(v[2]) then return {'U', fmt(now)} end
redis.call('HSET', KEYS[1], 'ra', fmt(now), 'rby', ARGV[1])
return {'K', fmt(now)}
`)

// ApproveByGrant: KEYS ap, apexp, the grant's marker in the approval's bucket. ARGV tenant, key,
// episode, the request's token, grant ID, decided by, reason, retention (µs), the grant's expiry
// (µs), namespace, tenant and tool it covers. Codes: K approved, N no approval, R the grant is
// revoked, X expired, O of another scope, S the approval is at another episode or request, C it
// is not pending (or overdue); all but N carry the approval as it is.
var ApproveByGrant = redis.NewScript(prelude + approvalPrelude + `
local ap, exp, mark = KEYS[1], KEYS[2], KEYS[3]
local now = clock()
local v = aread(ap, nil)
if not v[AST] then return {'N'} end
if redis.call('EXISTS', mark) == 1 then return aout('R', now, v) end
if now >= tonumber(ARGV[9]) then return aout('X', now, v) end
if v[ANS] ~= ARGV[10] or v[AT] ~= ARGV[11] or v[ATOOL] ~= ARGV[12] then return aout('O', now, v) end
if tonumber(v[AEP]) ~= tonumber(ARGV[3]) or (v[ARQ] or '') ~= ARGV[4] then return aout('S', now, v) end
if astatus(v, now) ~= 'pending' then return aout('C', now, v) end
v[AST], v[ADA], v[ADBY], v[AWHY], v[AEA], v[AGID] = 'approved', fmt(now), ARGV[6], ARGV[7], fmt(now + tonumber(ARGV[8])), ARGV[5]
redis.call('HSET', ap, 'st', v[AST], 'da', v[ADA], 'dby', v[ADBY], 'why', v[AWHY], 'ea', v[AEA], 'gid', v[AGID])
redis.call('ZADD', exp, v[AEA], ARGV[1] .. '\0' .. ARGV[2])
return aout('K', now, v)
`)

func init() { All = append(All, CreateGrant, GetGrants, MarkRevoked, RevokeGrant, ApproveByGrant) }

// GrantBase returns the key base of the grants of a store with this prefix.
func GrantBase(prefix string) string { return prefix + "{grants}" }

// GrantKeys returns the grant's hash and the gall index.
func GrantKeys(prefix, id string) []string {
	b := GrantBase(prefix)
	return []string{b + ":g:" + id, b + ":gall"}
}

// GrantMark returns the revoke marker of grant id in the bucket whose key base is base.
func GrantMark(base, id string) string { return base + ":grev:" + id }
