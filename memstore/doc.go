// Package memstore is an in-memory oncekeystore.Store for tests and single-process programs.
//
// It keeps records in a map guarded by one mutex and judges leases and retention on its own
// clock (Options.Clock). It behaves like pgstore in every respect storetest checks; like
// pgstore it has no change notification (waiters poll). It must not import pgstore, the
// interceptor or any Temporal package.
//
// Testing workflows with it: https://github.com/oncekey/oncekey/blob/main/docs/testing.md#testing-your-workflows
// The stores: https://github.com/oncekey/oncekey/blob/main/docs/stores.md
package memstore
