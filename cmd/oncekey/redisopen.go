package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/redisstore"
)

// redisTarget is the Redis the CLI connected to: the server, the database number and the key
// prefix (and the buckets, when not the default) of the store's keys.
type redisTarget struct {
	addr    string
	db      int
	prefix  string
	buckets int
}

// String names it for messages: `Redis at 127.0.0.1:6379 db 0, prefix "oncekey:"`.
func (t *redisTarget) String() string {
	s := fmt.Sprintf("Redis at %s db %d, prefix %s", printable(t.addr), t.db, strconv.Quote(t.prefix))
	if t.buckets != redisstore.DefaultBuckets {
		s += fmt.Sprintf(", %d buckets", t.buckets)
	}
	return s
}

// redisURLHelp says what a Redis store URL holds.
const redisURLHelp = "redis://[user:password@]host:6379/db (rediss:// for TLS, unix:///path/redis.sock), with ?prefix= and ?buckets= when the workers' redisstore.Options set them"

// openRedis opens redisstore on the Redis of u: go-redis's URL (redis.ParseURL) with two
// parameters of the store's own, prefix (redisstore.Options.Prefix, default "oncekey:") and
// buckets (Options.Buckets, default 16), which must be the workers'. It checks the server
// (redisstore.Store.Check) before it returns: unreachable is exit 4, a refused user or
// password exit 5, a malformed URL exit 2.
func openRedis(ctx context.Context, a *app, u string) (recordStore, func(), error) {
	if a.schema != "" {
		return nil, nil, fail(exitUsage, "--schema names a Postgres schema; %s is Redis, whose keys start with the prefix in the URL (?prefix=): drop --schema", a.storeSource())
	}
	bad := func(format string, args ...any) error {
		return fail(exitUsage, "%s %s: %s; want %s", a.storeSource(), printable(redactURL(u)), fmt.Sprintf(format, args...), redisURLHelp)
	}
	if strayAt(u) {
		return nil, nil, bad("it holds an @ where a host, database or query belongs; %s", encodeHint)
	}
	parsed, err := url.Parse(u)
	if err != nil {
		// Not url.Parse's text: it repeats the part of the URL it stopped at, the password's too.
		return nil, nil, bad("not a URL Go can parse; %s", encodeHint)
	}
	q := parsed.Query()
	opts := &redisstore.Options{Prefix: q.Get("prefix")}
	if b := q.Get("buckets"); b != "" {
		if opts.Buckets, err = strconv.Atoi(b); err != nil || opts.Buckets < 1 {
			return nil, nil, bad("buckets=%s is not a positive number", printable(b))
		}
	}
	q.Del("prefix")
	q.Del("buckets")
	parsed.RawQuery = q.Encode()
	ro, err := redis.ParseURL(parsed.String())
	if err != nil {
		return nil, nil, bad("%s", strings.TrimPrefix(oneLine(err), "redis: "))
	}
	redis.SetLogger(quietRedisLogger{}) // go-redis logs each failed dial; the command's error says it once
	rdb := redis.NewClient(ro)
	s, err := redisstore.New(rdb, opts)
	if err != nil {
		_ = rdb.Close()
		return nil, nil, bad("%s", oneLine(err))
	}
	t := &redisTarget{addr: ro.Addr, db: ro.DB, prefix: s.Prefix(), buckets: opts.Buckets}
	if t.buckets == 0 {
		t.buckets = redisstore.DefaultBuckets
	}
	cctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	if err := s.Check(cctx); err != nil {
		_ = rdb.Close()
		return nil, nil, redisConnectError(a, t, err)
	}
	a.where = t
	return s, func() { _ = rdb.Close() }, nil
}

// redisConnectError reports a failed check of the Redis at t: exit 5 when the server refused the
// user or password (retrying cannot help), exit 4 when it could not be reached, else exit 1 (a
// Redis older than 7).
func redisConnectError(a *app, t *redisTarget, err error) error {
	const set = "set --store or " + storeEnv + " to " + redisURLHelp
	var su *oncekeystore.StoreUnavailableError
	text := strings.TrimPrefix(oneLine(err), "redisstore: check: ")
	if errors.As(err, &su) {
		text = oneLine(su.Err)
	}
	text = strings.TrimSuffix(text, ".")
	switch {
	case redis.HasErrorPrefix(err, "WRONGPASS"), redis.HasErrorPrefix(err, "NOAUTH"), redis.HasErrorPrefix(err, "NOPERM"):
		return fail(exitConfig, "%s refused the user or password: %s; fix them in %s (redis://user:password@host:6379/0)", t, text, a.storeSource())
	case errors.As(err, &su), errors.Is(err, context.DeadlineExceeded):
		return fail(exitUnreachable, "cannot reach %s: %s; try again when the server accepts connections, or %s", t, text, set)
	}
	return fail(exitFailed, "%s: %s", t, text)
}

// quietRedisLogger drops go-redis's logs (redis.SetLogger).
type quietRedisLogger struct{}

func (quietRedisLogger) Printf(context.Context, string, ...any) {}
