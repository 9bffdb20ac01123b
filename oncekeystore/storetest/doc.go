// Package storetest is the conformance suite that defines a correct oncekeystore.Store, and of an
// oncekeystore.ApprovalStore for stores that keep approvals (RunApprovals, which Run calls for them).
//
// Every store's own tests call Run. It imports only the root package and testing libraries; it
// must not import any store implementation.
//
// The store contract: https://github.com/oncekey/oncekey/blob/main/docs/stores.md#the-contract-oncekeystorestoretest
// What it pins: https://github.com/oncekey/oncekey/blob/main/docs/design.md#fencing
package storetest
