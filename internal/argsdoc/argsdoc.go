// Package argsdoc lets oncekey's interceptor tell the root package that the arguments document of
// an operation it built is in canonical form already, so that the operation's key and fingerprint
// use that document as it is instead of encoding it again: each claimed call's arguments are
// encoded once.
package argsdoc

// MarkCanonical is set by package oncekey when it is initialised. MarkCanonical(op), op being a
// *oncekey.Operation whose ArgsJSON holds canonical JSON (package canonical) the caller made,
// records that it does. The record holds only while ArgsJSON is that same slice: an operation
// whose ArgsJSON is set again is encoded as any other.
var MarkCanonical func(op any)
