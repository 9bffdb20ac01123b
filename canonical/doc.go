// Package canonical encodes JSON canonically: RFC 8785 (JSON Canonicalization Scheme) with
// oncekey's extensions (NFC strings, exact plain integers, errors instead of silent merges).
// It is a leaf package and must not import Temporal or any other oncekey package.
//
// Where fingerprints use it: https://github.com/oncekey/oncekey/blob/main/docs/design.md#keys-and-fingerprints
package canonical
