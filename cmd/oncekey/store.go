package main

import (
	"context"
	"net/url"
	"regexp"
	"strings"

	"github.com/oncekey/oncekey/oncekeystore"
	"github.com/oncekey/oncekey/pgstore"
)

// storeEnv names the store when --store is not given.
const storeEnv = "ONCEKEY_STORE"

// recordStore is what the store commands read and write. Every store the CLI opens implements
// the record, approval and inspection interfaces, so each command is written once against them
// and prints the same, with the same errors and exit codes, on every store.
type recordStore interface {
	oncekeystore.Store
	oncekeystore.ApprovalStore
	oncekeystore.GrantStore
	oncekeystore.StoreInspector
	// Check tells whether the store is there and ready (pgstore: the tables migrated; redisstore:
	// Redis 7 or later).
	Check(ctx context.Context) error
}

// storeOpener opens the stores of some URL schemes. open connects, sets a.where to where it
// connected (every later message names it) and returns the store and what closes it; its errors
// are exit errors that say what to do.
type storeOpener struct {
	name    string
	schemes []string
	open    func(ctx context.Context, a *app, storeURL string) (recordStore, func(), error)
}

// storeOpeners are the stores the CLI opens, by the scheme of --store (or ONCEKEY_STORE); the
// first one also opens the store when neither is set (Postgres from --database-url, DATABASE_URL
// or the libpq variables).
var storeOpeners = []storeOpener{
	{name: "Postgres", schemes: []string{"postgres", "postgresql"}, open: openPostgres},
	{name: "Redis", schemes: []string{"redis", "rediss", "unix"}, open: openRedis},
}

// storeURL is the store the commands use: --store, else ONCEKEY_STORE; "" means Postgres from
// --database-url, DATABASE_URL or the libpq variables.
func (a *app) storeURL() string {
	if a.storeFlag != "" {
		return a.storeFlag
	}
	return a.getenv(storeEnv)
}

// opener returns the opener of the store URL u ("" is Postgres's), or a usage error: one that
// names the schemes the CLI opens and says how to pick one, or one that refuses --database-url
// beside a store URL.
func (a *app) opener(u string) (storeOpener, error) {
	if u == "" {
		return storeOpeners[0], nil
	}
	if a.databaseURL != "" {
		return storeOpener{}, fail(exitUsage, "give the store once: %s names it, so drop --database-url (or put that URL in --store)", a.storeSource())
	}
	scheme, _, _ := splitScheme(u)
	scheme = strings.ToLower(scheme)
	var known []string
	for _, o := range storeOpeners {
		for _, s := range o.schemes {
			if s == scheme {
				return o, nil
			}
			known = append(known, s+"://")
		}
	}
	return storeOpener{}, fail(exitUsage, "%s %s is not a store URL the CLI opens (scheme %q): give --store (or %s) one of %s, e.g. postgres://user@host:5432/db or redis://host:6379/0?prefix=oncekey:",
		a.storeSource(), printable(redactURL(u)), scheme, storeEnv, strings.Join(known, ", "))
}

// storeSource names where the store URL came from, for messages: "--store" or "ONCEKEY_STORE".
func (a *app) storeSource() string {
	if a.storeFlag != "" {
		return "--store"
	}
	return storeEnv
}

// openStore opens the store the flags and environment name. Close it with the returned func.
func (a *app) openStore(ctx context.Context) (recordStore, func(), error) {
	u := a.storeURL()
	o, err := a.opener(u)
	if err != nil {
		return nil, nil, err
	}
	return o.open(ctx, a, u)
}

// openPostgres opens pgstore on the database of u ("" for --database-url, DATABASE_URL or the
// libpq variables), in --schema.
func openPostgres(ctx context.Context, a *app, u string) (recordStore, func(), error) {
	pool, err := a.poolAt(ctx, u)
	if err != nil {
		return nil, nil, err
	}
	return pgstore.New(pool, &pgstore.Options{Schema: a.schema}), pool.Close, nil
}

// splitScheme splits u at its "://": the scheme and the rest, ok true. A u without "://", or
// whose text before it is not a scheme (a letter, then letters, digits, "+", "-" or "."), has
// none: "", u, false (so a password that holds "://" is never taken for a scheme).
func splitScheme(u string) (scheme, rest string, ok bool) {
	scheme, rest, ok = strings.Cut(u, "://")
	if !ok || !schemeRE.MatchString(scheme) {
		return "", u, false
	}
	return scheme, rest, true
}

var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// redacted stands in a printed store URL for what redactURL removes.
const redacted = "xxxxx"

var (
	// dsnPasswordRE is a key=value of a Postgres connection string whose key ends in "password"
	// (password, sslpassword), its value quoted ('a b', with \' and \\ escapes) or up to a space.
	dsnPasswordRE = regexp.MustCompile(`(?i)[a-z_]*password\s*=\s*('(?:\\.|[^'\\])*'?|\S*)`)
	// queryPairRE is a key=value of a URL's query (after "?" or "&", up to "&" or "#").
	queryPairRE = regexp.MustCompile(`[?&]([^=&#]*)=([^&#]*)`)
)

// redactURL returns the store URL or Postgres connection string u as it is safe to print, in
// every message, log line and output of the CLI and the inbox, whatever u's shape: everything
// between "://" (the start, when u has no scheme) and the last "@", and the value of every
// password key (password=, sslpassword=, in a connection string or a URL's query, its key
// percent-decoded), replaced by xxxxx. It never parses u as a URL, so a URL that does not parse
// (a "%" that is not an escape, a "/", "?", "#" or "@" in the password, an unclosed "[") loses
// its password too; it may remove more than the password (the host, when the query holds an
// "@"), never less.
func redactURL(u string) string {
	mask := make([]bool, len(u))
	hide := func(from, to int) {
		for i := from; i < to; i++ {
			mask[i] = true
		}
	}
	_, rest, isURL := splitScheme(u)
	start := len(u) - len(rest)
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		hide(start, start+at)
	}
	for _, m := range dsnPasswordRE.FindAllStringSubmatchIndex(u, -1) {
		hide(m[2], m[3])
	}
	if isURL {
		for _, m := range queryPairRE.FindAllStringSubmatchIndex(u, -1) {
			key, err := url.QueryUnescape(u[m[2]:m[3]])
			if err != nil || strings.Contains(strings.ToLower(key), "pass") {
				hide(m[4], m[5])
			}
		}
	}
	var b strings.Builder
	for i := 0; i < len(u); i++ {
		if !mask[i] {
			b.WriteByte(u[i])
			continue
		}
		b.WriteString(redacted)
		for i+1 < len(u) && mask[i+1] {
			i++
		}
	}
	return b.String()
}

// strayAt reports whether a parser could take part of the user or password of the store URL u
// for its host, port, path or query: u has an "@" after the first "/", "?" or "#" that follows
// its "://", or more than one "@" before it (pgx ends the user and password at the first "@",
// net/url at the last). Such a URL is refused unparsed, so no part of its password is ever
// printed as a host, a database or a parser's complaint: the user and password must
// percent-encode these characters.
func strayAt(u string) bool {
	_, rest, ok := splitScheme(u)
	if !ok {
		return false
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	return strings.Count(rest[:end], "@") > 1 || strings.Contains(rest[end:], "@")
}

// encodeHint says how to write a user or password that a URL cannot hold as it is.
const encodeHint = "percent-encode each %, /, ?, #, @, :, [ and ] in the user and password (%25, %2F, %3F, %23, %40, %3A, %5B, %5D)"

// isPostgres reports whether the store the flags and environment name is Postgres.
func (a *app) isPostgres() bool {
	o, err := a.opener(a.storeURL())
	return err == nil && o.name == storeOpeners[0].name
}
