// Package storetest is the conformance suite that defines a correct oncekey.Store.
//
// Every store's own tests call Run. It imports only the root package and testing libraries; it
// must not import any store implementation.
package storetest
