package main

import (
	"context"
	"net/url"
	"strings"

	"github.com/oncekey/oncekey"
	"github.com/oncekey/oncekey/pgstore"
)

// storeEnv names the store when --store is not given.
const storeEnv = "ONCEKEY_STORE"

// recordStore is what the store commands read and write. Every store the CLI opens implements
// the record, approval and inspection interfaces, so each command is written once against them
// and prints the same, with the same errors and exit codes, on every store.
type recordStore interface {
	oncekey.Store
	oncekey.ApprovalStore
	oncekey.GrantStore
	oncekey.StoreInspector
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
	scheme, _, ok := strings.Cut(u, "://")
	if !ok {
		scheme = ""
	}
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

// redactURL is u without its password, for messages.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		return u
	}
	return p.Redacted()
}

// isPostgres reports whether the store the flags and environment name is Postgres.
func (a *app) isPostgres() bool {
	o, err := a.opener(a.storeURL())
	return err == nil && o.name == storeOpeners[0].name
}
