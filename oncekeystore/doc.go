// Package oncekeystore is the store contract: what a store must do for oncekey's claim protocol,
// approvals and standing grants, and the rows it keeps. It is for store authors and for tools
// that read records (the CLI); tool authors never import it.
//
// A store implements Store (records: claim, fenced writes, resolve, purge) and, for the features
// that need them, ApprovalStore (Policy.Approval), GrantStore (standing grants), StoreInspector
// (stats and purge previews for the CLI) and TxStore (Transactional tools). Every method takes a
// Params struct that validates itself (Validate returns an *InvalidParamsError naming the field)
// and returns the row as the store holds it after the call, with times from the store's own
// clock. The errors a store returns are this package's: ErrNotFound, ErrLostClaim (a fenced write
// at an epoch that is no longer the record's), *StaleDecisionError, *StatusConflictError,
// *StoreUnavailableError (the store did not answer: callers fail closed), *StoreSchemaError (a
// table missing or not migrated), *ResultTooLargeError.
//
// The package imports nothing of Temporal, so a store links neither the SDK nor the engine.
// Package storetest is the conformance suite every store passes (pgstore, memstore, redisstore);
// package storemock holds generated gomock mocks for tests that need a fault at an exact point.
// The stores and their trade-offs: https://github.com/oncekey/oncekey/blob/main/docs/stores.md
package oncekeystore
